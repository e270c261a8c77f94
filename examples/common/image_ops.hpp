// lotus — image preprocessing ops shared by the examples and the mapping probes (libjpeg-turbo)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint8_t, std::uint64_t
#include <stdexcept>  // std::runtime_error
#include <string>     // paths
#include <utility>    // std::pair
#include <vector>     // pixel and tensor storage

/// Real, separately compiled image ops (no lotus dependency) so that profilers can map every op to
/// its own functions. Each op is an out-of-line function; the hot helpers are `noinline`.
namespace lotus_examples {

/// Thrown for unreadable files, corrupt JPEGs and invalid op arguments.
struct image_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Deterministic generator (splitmix64): same seed, same stream, on every platform and compiler.
class rng {
 public:
  explicit rng(std::uint64_t seed = 0) noexcept : state_(seed) {}
  std::uint64_t next() noexcept;
  /// Uniform in [0, 1).
  double uniform() noexcept;
  /// Uniform in [lo, hi).
  double uniform(double lo, double hi) noexcept;
  /// Uniform integer in [lo, hi] (inclusive).
  int uniform_int(int lo, int hi) noexcept;

 private:
  std::uint64_t state_;
};

/// Mixes several values into one seed (per-sample streams independent of worker scheduling).
std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0) noexcept;

/// 8-bit interleaved image, HWC layout (RGB when channels == 3).
struct image {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<std::uint8_t> pixels;  // height * width * channels bytes

  image() = default;
  image(int w, int h, int c);
  std::size_t size() const noexcept { return pixels.size(); }
};

/// Float tensor, CHW layout.
struct tensor {
  int channels = 0;
  int height = 0;
  int width = 0;
  std::vector<float> values;  // channels * height * width

  tensor() = default;
  tensor(int c, int h, int w);
};

/// A collated batch: N samples of the same CHW shape, stacked, plus their labels.
struct batch {
  int count = 0;
  int channels = 0;
  int height = 0;
  int width = 0;
  std::vector<float> values;  // count * channels * height * width
  std::vector<int> labels;
};

// ---- files and JPEG -------------------------------------------------------------------------

/// Reads a whole file into memory.
std::vector<std::uint8_t> read_file(const std::string& path);
/// Writes bytes to a file (truncating).
void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes);

/// Encodes an RGB (3-channel) or grayscale (1-channel) image as baseline JPEG.
std::vector<std::uint8_t> encode_jpeg(const image& img, int quality = 90);
/// Decodes a JPEG to RGB (grayscale/CMYK-free inputs are converted to 3 channels).
image decode_jpeg(const std::uint8_t* data, std::size_t size);
inline image decode_jpeg(const std::vector<std::uint8_t>& bytes) {
  return decode_jpeg(bytes.data(), bytes.size());
}
/// torchvision's default_loader equivalent: read the file, decode, convert to RGB.
image load_image(const std::string& path);

// ---- synthetic data ---------------------------------------------------------------------------

/// A natural-looking test picture (gradients, blobs, texture, noise) so JPEG work is realistic.
image synthetic_image(int width, int height, std::uint64_t seed);

/// One generated file of a synthetic dataset.
struct dataset_entry {
  std::string path;
  int label = 0;
};

/// Options for generate_dataset().
struct dataset_spec {
  int count = 64;      // number of images
  int min_side = 160;  // each side drawn uniformly in [min_side, max_side]
  int max_side = 512;
  int classes = 10;  // label = index % classes
  int quality = 90;  // JPEG quality
  std::uint64_t seed = 1;
};

/// Writes `spec.count` JPEGs of varied sizes into `dir` (which must exist) as
/// `img_<index>_c<label>.jpg`, plus `manifest.txt` describing the spec. If a manifest with the same
/// spec is already there and every file exists, nothing is rewritten. Deterministic in the seed.
std::vector<dataset_entry> generate_dataset(const std::string& dir, const dataset_spec& spec);

// ---- transforms (torchvision semantics) -------------------------------------------------------

/// A crop rectangle in source pixels.
struct crop_box {
  int top = 0;
  int left = 0;
  int height = 0;
  int width = 0;
};

/// torchvision RandomResizedCrop.get_params: area fraction in `scale`, aspect ratio log-uniform in
/// `ratio`, 10 attempts, then a centre crop clamped to the ratio range.
crop_box random_resized_crop_params(int height, int width, rng& gen,
                                    std::pair<double, double> scale = {0.08, 1.0},
                                    std::pair<double, double> ratio = {3.0 / 4.0, 4.0 / 3.0});

/// Bilinear resample of `box` in `src` to out_h x out_w (half-pixel centres, edge clamping).
image resize_bilinear(const image& src, const crop_box& box, int out_h, int out_w);

/// RandomResizedCrop(size): random crop box + bilinear resize to size x size.
image random_resized_crop(const image& src, int size, rng& gen);

/// Mirrors left-right.
image horizontal_flip(image img);

/// RandomHorizontalFlip(p).
image random_horizontal_flip(image img, rng& gen, double p = 0.5);

/// ToTensor: HWC u8 -> CHW float in [0, 1].
tensor to_tensor(const image& img);

/// Normalize: (x - mean[c]) / std[c] per channel, in place on a moved-in tensor.
tensor normalize(tensor t, const std::vector<float>& mean, const std::vector<float>& stddev);

/// ImageNet mean/std used by the reference pipeline.
const std::vector<float>& imagenet_mean();
const std::vector<float>& imagenet_std();

/// default_collate: stacks same-shape tensors into one batch.
batch collate(std::vector<tensor> samples, std::vector<int> labels);

/// Position-weighted checksum of a batch, for
/// determinism checks across worker counts and modes.
double checksum(const batch& b) noexcept;

}  // namespace lotus_examples
