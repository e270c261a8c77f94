// lotus — image preprocessing ops shared by the examples and the mapping probes (libjpeg-turbo)
// SPDX-License-Identifier: MIT
#include "image_ops.hpp"

#include <jpeglib.h>
#include <sys/stat.h>  // stat

#include <algorithm>  // std::clamp, std::min
#include <cerrno>     // errno
#include <cmath>      // std::log, std::exp, std::sqrt, std::lround
#include <csetjmp>    // libjpeg error recovery
#include <cstdio>     // FILE, jpeglib.h needs it first
#include <cstring>    // std::strerror
#include <fstream>    // manifest
#include <sstream>    // manifest
#include <string>

#define LOTUS_EXAMPLES_NOINLINE __attribute__((noinline))

namespace lotus_examples {

// ---- rng --------------------------------------------------------------------------------------

std::uint64_t rng::next() noexcept {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double rng::uniform() noexcept {
  return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0);  // 53 bits
}

double rng::uniform(double lo, double hi) noexcept { return lo + (hi - lo) * uniform(); }

int rng::uniform_int(int lo, int hi) noexcept {
  if (hi <= lo) return lo;
  const auto span = static_cast<std::uint64_t>(static_cast<std::int64_t>(hi) - lo + 1);
  return static_cast<int>(lo + static_cast<std::int64_t>(next() % span));
}

std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c) noexcept {
  rng r(a ^ 0x243F6A8885A308D3ULL);
  std::uint64_t s = r.next() ^ (b * 0x9E3779B97F4A7C15ULL);
  rng r2(s);
  s = r2.next() ^ (c * 0xC2B2AE3D27D4EB4FULL);
  rng r3(s);
  return r3.next();
}

// ---- containers -------------------------------------------------------------------------------

image::image(int w, int h, int c) : width(w), height(h), channels(c) {
  if (w <= 0 || h <= 0 || c <= 0) throw image_error("image: non-positive dimensions");
  pixels.resize(static_cast<std::size_t>(w) * static_cast<std::size_t>(h) *
                static_cast<std::size_t>(c));
}

tensor::tensor(int c, int h, int w) : channels(c), height(h), width(w) {
  if (w <= 0 || h <= 0 || c <= 0) throw image_error("tensor: non-positive dimensions");
  values.resize(static_cast<std::size_t>(c) * static_cast<std::size_t>(h) *
                static_cast<std::size_t>(w));
}

// ---- files ------------------------------------------------------------------------------------

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    throw image_error("cannot open '" + path + "': " + std::strerror(errno));
  }
  std::vector<std::uint8_t> bytes;
  std::uint8_t chunk[65536];
  for (;;) {
    const std::size_t n = std::fread(chunk, 1, sizeof chunk, f);
    bytes.insert(bytes.end(), chunk, chunk + n);
    if (n < sizeof chunk) break;
  }
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) throw image_error("cannot read '" + path + "'");
  return bytes;
}

void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    throw image_error("cannot create '" + path + "': " + std::strerror(errno));
  }
  const std::size_t n = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool failed = std::fclose(f) != 0 || n != bytes.size();
  if (failed) throw image_error("cannot write '" + path + "'");
}

// ---- JPEG -------------------------------------------------------------------------------------

namespace {

// libjpeg reports fatal errors through error_exit, which must not return; jump back to the
// caller's setjmp point (only trivially destructible objects live between the two).
struct jpeg_error_state {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

extern "C" void lotus_examples_jpeg_error_exit(j_common_ptr cinfo) {
  auto* state = reinterpret_cast<jpeg_error_state*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, state->message);
  std::longjmp(state->jump, 1);
}

extern "C" void lotus_examples_jpeg_silent(j_common_ptr, int) {}

}  // namespace

std::vector<std::uint8_t> encode_jpeg(const image& img, int quality) {
  if (img.channels != 3 && img.channels != 1) {
    throw image_error("encode_jpeg: need 1 or 3 channels");
  }
  if (img.pixels.size() != static_cast<std::size_t>(img.width) *
                               static_cast<std::size_t>(img.height) *
                               static_cast<std::size_t>(img.channels)) {
    throw image_error("encode_jpeg: pixel buffer does not match dimensions");
  }
  jpeg_compress_struct cinfo{};
  jpeg_error_state err{};
  unsigned char* out = nullptr;
  unsigned long out_size = 0;  // NOLINT(runtime/int): libjpeg's type
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = lotus_examples_jpeg_error_exit;
  if (setjmp(err.jump) != 0) {
    jpeg_destroy_compress(&cinfo);
    std::free(out);
    throw image_error(std::string("encode_jpeg: ") + err.message);
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &out, &out_size);
  cinfo.image_width = static_cast<JDIMENSION>(img.width);
  cinfo.image_height = static_cast<JDIMENSION>(img.height);
  cinfo.input_components = img.channels;
  cinfo.in_color_space = img.channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, std::clamp(quality, 1, 100), TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  const std::size_t stride =
      static_cast<std::size_t>(img.width) * static_cast<std::size_t>(img.channels);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(img.pixels.data() + cinfo.next_scanline * stride);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::vector<std::uint8_t> bytes(out, out + out_size);
  jpeg_destroy_compress(&cinfo);
  std::free(out);
  return bytes;
}

LOTUS_EXAMPLES_NOINLINE image decode_jpeg(const std::uint8_t* data, std::size_t size) {
  if (data == nullptr || size < 4) throw image_error("decode_jpeg: not a JPEG (too short)");
  image img;  // constructed before setjmp so a longjmp never skips its destructor
  jpeg_decompress_struct cinfo{};
  jpeg_error_state err{};
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = lotus_examples_jpeg_error_exit;
  err.mgr.emit_message = lotus_examples_jpeg_silent;
  if (setjmp(err.jump) != 0) {
    jpeg_destroy_decompress(&cinfo);
    throw image_error(std::string("decode_jpeg: ") + err.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));  // NOLINT(runtime/int)
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  img.width = static_cast<int>(cinfo.output_width);
  img.height = static_cast<int>(cinfo.output_height);
  img.channels = cinfo.output_components;
  img.pixels.resize(static_cast<std::size_t>(img.width) * static_cast<std::size_t>(img.height) *
                    static_cast<std::size_t>(img.channels));
  const std::size_t stride =
      static_cast<std::size_t>(img.width) * static_cast<std::size_t>(img.channels);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = img.pixels.data() + cinfo.output_scanline * stride;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return img;
}

image load_image(const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_file(path);
  try {
    return decode_jpeg(bytes);
  } catch (const image_error& e) {
    throw image_error(path + ": " + e.what());
  }
}

// ---- synthetic data ---------------------------------------------------------------------------

LOTUS_EXAMPLES_NOINLINE image synthetic_image(int width, int height, std::uint64_t seed) {
  image img(width, height, 3);
  rng gen(seed);
  struct blob {
    double cx, cy, r2;
    double color[3];
  };
  const int blob_count = gen.uniform_int(3, 7);
  std::vector<blob> blobs;
  for (int i = 0; i < blob_count; ++i) {
    const double r = gen.uniform(0.05, 0.35) * std::min(width, height);
    blobs.push_back({gen.uniform(0, width),
                     gen.uniform(0, height),
                     r * r,
                     {gen.uniform(0, 255), gen.uniform(0, 255), gen.uniform(0, 255)}});
  }
  double base[3][3];  // per channel: offset, x slope, y slope
  for (auto& b : base) {
    b[0] = gen.uniform(20, 200);
    b[1] = gen.uniform(-60, 60) / width;
    b[2] = gen.uniform(-60, 60) / height;
  }
  const double freq_x = gen.uniform(0.02, 0.2);
  const double freq_y = gen.uniform(0.02, 0.2);
  const double texture = gen.uniform(5, 30);
  std::uint8_t* p = img.pixels.data();
  for (int y = 0; y < height; ++y) {
    const double ty = std::sin(freq_y * y);
    for (int x = 0; x < width; ++x) {
      double c[3];
      for (int k = 0; k < 3; ++k) c[k] = base[k][0] + base[k][1] * x + base[k][2] * y;
      for (const blob& b : blobs) {
        const double dx = x - b.cx;
        const double dy = y - b.cy;
        if (dx * dx + dy * dy < b.r2) {
          for (int k = 0; k < 3; ++k) c[k] = 0.3 * c[k] + 0.7 * b.color[k];
        }
      }
      const double t = texture * std::sin(freq_x * x + 2.0 * ty);
      const double noise = static_cast<double>(gen.next() & 15U) - 7.5;
      for (int k = 0; k < 3; ++k) {
        *p++ = static_cast<std::uint8_t>(std::clamp(c[k] + t + noise, 0.0, 255.0));
      }
    }
  }
  return img;
}

namespace {

std::string manifest_text(const dataset_spec& spec) {
  std::ostringstream os;
  os << "lotus-example-dataset 1\ncount " << spec.count << "\nmin_side " << spec.min_side
     << "\nmax_side " << spec.max_side << "\nclasses " << spec.classes << "\nquality "
     << spec.quality << "\nseed " << spec.seed << "\n";
  return os.str();
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

std::vector<dataset_entry> generate_dataset(const std::string& dir, const dataset_spec& spec) {
  if (spec.count <= 0) throw image_error("generate_dataset: count must be positive");
  if (spec.min_side < 8 || spec.max_side < spec.min_side) {
    throw image_error("generate_dataset: need 8 <= min_side <= max_side");
  }
  if (spec.classes <= 0) throw image_error("generate_dataset: classes must be positive");
  std::vector<dataset_entry> entries;
  entries.reserve(static_cast<std::size_t>(spec.count));
  for (int i = 0; i < spec.count; ++i) {
    const int label = i % spec.classes;
    char name[64];
    std::snprintf(name, sizeof name, "/img_%06d_c%d.jpg", i, label);
    entries.push_back({dir + name, label});
  }
  const std::string manifest_path = dir + "/manifest.txt";
  const std::string wanted = manifest_text(spec);
  {
    std::ifstream in(manifest_path);
    std::stringstream have;
    have << in.rdbuf();
    if (in && have.str() == wanted &&
        std::all_of(entries.begin(), entries.end(),
                    [](const dataset_entry& e) { return file_exists(e.path); })) {
      return entries;
    }
  }
  std::remove(manifest_path.c_str());  // never leave a manifest that promises missing files
  rng sizes(mix_seed(spec.seed, 0x51AE));
  for (int i = 0; i < spec.count; ++i) {
    const int w = sizes.uniform_int(spec.min_side, spec.max_side);
    const int h = sizes.uniform_int(spec.min_side, spec.max_side);
    const image img =
        synthetic_image(w, h, mix_seed(spec.seed, static_cast<std::uint64_t>(i), 0x1A6E));
    write_file(entries[static_cast<std::size_t>(i)].path, encode_jpeg(img, spec.quality));
  }
  std::ofstream out(manifest_path, std::ios::trunc);
  out << wanted;
  if (!out) throw image_error("cannot write '" + manifest_path + "'");
  return entries;
}

// ---- transforms -------------------------------------------------------------------------------

crop_box random_resized_crop_params(int height, int width, rng& gen,
                                    std::pair<double, double> scale,
                                    std::pair<double, double> ratio) {
  if (height <= 0 || width <= 0) throw image_error("random_resized_crop: empty image");
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(ratio.first);
  const double log_hi = std::log(ratio.second);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * gen.uniform(scale.first, scale.second);
    const double aspect = std::exp(gen.uniform(log_lo, log_hi));
    const auto w = static_cast<int>(std::lround(std::sqrt(target_area * aspect)));
    const auto h = static_cast<int>(std::lround(std::sqrt(target_area / aspect)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const int top = gen.uniform_int(0, height - h);
      const int left = gen.uniform_int(0, width - w);
      return {top, left, h, w};
    }
  }
  // Fallback: centre crop with the aspect ratio clamped into range.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width;
  int h = height;
  if (in_ratio < ratio.first) {
    h = std::max(1, static_cast<int>(std::lround(w / ratio.first)));
  } else if (in_ratio > ratio.second) {
    w = std::max(1, static_cast<int>(std::lround(h * ratio.second)));
  }
  h = std::min(h, height);
  w = std::min(w, width);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

LOTUS_EXAMPLES_NOINLINE image resize_bilinear(const image& src, const crop_box& box, int out_h,
                                              int out_w) {
  if (out_h <= 0 || out_w <= 0) throw image_error("resize_bilinear: non-positive output size");
  if (box.height <= 0 || box.width <= 0 || box.top < 0 || box.left < 0 ||
      box.top + box.height > src.height || box.left + box.width > src.width) {
    throw image_error("resize_bilinear: crop box outside the image");
  }
  image dst(out_w, out_h, src.channels);
  const int ch = src.channels;
  // Per output column: two source columns and the weight of the right one.
  std::vector<int> x0(static_cast<std::size_t>(out_w));
  std::vector<int> x1(static_cast<std::size_t>(out_w));
  std::vector<float> wx(static_cast<std::size_t>(out_w));
  const double sx = static_cast<double>(box.width) / out_w;
  for (int x = 0; x < out_w; ++x) {
    double fx = (x + 0.5) * sx - 0.5;
    fx = std::clamp(fx, 0.0, static_cast<double>(box.width - 1));
    const auto i0 = static_cast<int>(fx);
    const auto ux = static_cast<std::size_t>(x);
    x0[ux] = (box.left + i0) * ch;
    x1[ux] = (box.left + std::min(i0 + 1, box.width - 1)) * ch;
    wx[ux] = static_cast<float>(fx - i0);
  }
  const double sy = static_cast<double>(box.height) / out_h;
  const std::size_t src_stride = static_cast<std::size_t>(src.width) * static_cast<std::size_t>(ch);
  std::uint8_t* out = dst.pixels.data();
  for (int y = 0; y < out_h; ++y) {
    double fy = (y + 0.5) * sy - 0.5;
    fy = std::clamp(fy, 0.0, static_cast<double>(box.height - 1));
    const auto j0 = static_cast<int>(fy);
    const int j1 = std::min(j0 + 1, box.height - 1);
    const auto wy = static_cast<float>(fy - j0);
    const std::uint8_t* row0 =
        src.pixels.data() + static_cast<std::size_t>(box.top + j0) * src_stride;
    const std::uint8_t* row1 =
        src.pixels.data() + static_cast<std::size_t>(box.top + j1) * src_stride;
    for (int x = 0; x < out_w; ++x) {
      const auto ux = static_cast<std::size_t>(x);
      const float w1 = wx[ux];
      const float w0 = 1.0f - w1;
      for (int k = 0; k < ch; ++k) {
        const float top = w0 * row0[x0[ux] + k] + w1 * row0[x1[ux] + k];
        const float bottom = w0 * row1[x0[ux] + k] + w1 * row1[x1[ux] + k];
        const float v = top + wy * (bottom - top);
        *out++ = static_cast<std::uint8_t>(std::clamp(v + 0.5f, 0.0f, 255.0f));
      }
    }
  }
  return dst;
}

image random_resized_crop(const image& src, int size, rng& gen) {
  const crop_box box = random_resized_crop_params(src.height, src.width, gen);
  return resize_bilinear(src, box, size, size);
}

LOTUS_EXAMPLES_NOINLINE image horizontal_flip(image img) {
  const std::size_t ch = static_cast<std::size_t>(img.channels);
  const std::size_t w = static_cast<std::size_t>(img.width);
  for (std::size_t y = 0; y < static_cast<std::size_t>(img.height); ++y) {
    std::uint8_t* row = img.pixels.data() + y * w * ch;
    for (std::size_t l = 0, r = w - 1; l < r; ++l, --r) {
      for (std::size_t k = 0; k < ch; ++k) std::swap(row[l * ch + k], row[r * ch + k]);
    }
  }
  return img;
}

image random_horizontal_flip(image img, rng& gen, double p) {
  if (gen.uniform() < p) return horizontal_flip(std::move(img));
  return img;
}

LOTUS_EXAMPLES_NOINLINE tensor to_tensor(const image& img) {
  tensor t(img.channels, img.height, img.width);
  const std::size_t plane =
      static_cast<std::size_t>(img.height) * static_cast<std::size_t>(img.width);
  const std::size_t ch = static_cast<std::size_t>(img.channels);
  const std::uint8_t* in = img.pixels.data();
  for (std::size_t i = 0; i < plane; ++i) {
    for (std::size_t k = 0; k < ch; ++k) {
      t.values[k * plane + i] = static_cast<float>(in[i * ch + k]) * (1.0f / 255.0f);
    }
  }
  return t;
}

LOTUS_EXAMPLES_NOINLINE tensor normalize(tensor t, const std::vector<float>& mean,
                                         const std::vector<float>& stddev) {
  const auto ch = static_cast<std::size_t>(t.channels);
  if (mean.size() != ch || stddev.size() != ch) {
    throw image_error("normalize: mean/std size differs from the channel count");
  }
  const std::size_t plane = static_cast<std::size_t>(t.height) * static_cast<std::size_t>(t.width);
  for (std::size_t k = 0; k < ch; ++k) {
    if (stddev[k] == 0.0f) throw image_error("normalize: zero standard deviation");
    const float m = mean[k];
    const float inv = 1.0f / stddev[k];
    float* v = t.values.data() + k * plane;
    for (std::size_t i = 0; i < plane; ++i) v[i] = (v[i] - m) * inv;
  }
  return t;
}

const std::vector<float>& imagenet_mean() {
  static const std::vector<float> m{0.485f, 0.456f, 0.406f};
  return m;
}

const std::vector<float>& imagenet_std() {
  static const std::vector<float> s{0.229f, 0.224f, 0.225f};
  return s;
}

LOTUS_EXAMPLES_NOINLINE batch collate(std::vector<tensor> samples, std::vector<int> labels) {
  if (samples.empty()) throw image_error("collate: empty batch");
  if (labels.size() != samples.size()) throw image_error("collate: label count differs");
  batch b;
  b.count = static_cast<int>(samples.size());
  b.channels = samples.front().channels;
  b.height = samples.front().height;
  b.width = samples.front().width;
  const std::size_t each = samples.front().values.size();
  b.values.resize(each * samples.size());
  float* out = b.values.data();
  for (const tensor& t : samples) {
    if (t.channels != b.channels || t.height != b.height || t.width != b.width) {
      throw image_error("collate: samples have different shapes");
    }
    std::copy(t.values.begin(), t.values.end(), out);
    out += each;
  }
  b.labels = std::move(labels);
  return b;
}

double checksum(const batch& b) noexcept {
  double sum = 0.0;
  const std::size_t n = b.values.size();
  for (std::size_t i = 0; i < n; ++i) {
    sum += static_cast<double>(b.values[i]) * static_cast<double>((i % 7) + 1);
  }
  for (std::size_t i = 0; i < b.labels.size(); ++i)
    sum += b.labels[i] * 1e-3 * static_cast<double>(i + 1);
  return sum;
}

}  // namespace lotus_examples
