// lotus tests — an ITT-annotated program with a minimal ITT static part of its own (direction 2)
// SPDX-License-Identifier: MIT
//
// Written from the ABI facts in tools/docs/ITT.md (no Intel code): the `__itt_*` entry points the
// program calls bind, at the first call, to the collector named by INTEL_LIBITTNOTIFY64 through
// the `__itt_api_init(global, groups)` handshake, as ittnotify's static part does; without a
// collector every call is a no-op. As in ittnotify's, domains and string handles created before
// the first task or control call live on the static part's own lists (the collector adopts them
// at the handshake). Like oneDNN, tasks go to the domain "oneDNN".
//
//   itt_only            2 threads x 150 tasks Conv, each holding a nested Relu; on the main thread
//                       a frame, a marker, 5 tasks "Paused" between __itt_pause and __itt_resume,
//                       and one task end without a task
//   itt_only names N    N distinct string handles, one task each (the collector's bounds)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct itt_domain {
  volatile int flags;
  const char* nameA;
  void* nameW;
  int extra1;
  void* extra2;
  struct itt_domain* next;
} itt_domain;

typedef struct itt_string_handle {
  const char* strA;
  void* strW;
  int extra1;
  void* extra2;
  struct itt_string_handle* next;
} itt_string_handle;

typedef struct itt_id {
  unsigned long long d1, d2, d3;
} itt_id;

typedef struct itt_api_info {
  const char* name;
  void** func_ptr;
  void* init_func;
  void* null_func;
  int group;
} itt_api_info;

typedef struct itt_global {
  unsigned char magic[8];
  unsigned long version_major, version_minor, version_build;
  volatile long api_initialized, mutex_initialized, atomic_counter;
  pthread_mutex_t mutex;
  void* lib;
  void* error_handler;
  const char** dll_path_ptr;
  itt_api_info* api_list_ptr;
  struct itt_global* next;
  void *thread_list, *domain_list, *string_list;
  int state;
  void* counter_list;
  unsigned int ipt_collect_events;
  void *histogram_list, *counter_metadata_list;
} itt_global;

#if defined(__x86_64__) && defined(__linux__)
_Static_assert(sizeof(itt_api_info) == 40, "__itt_api_info layout");
_Static_assert(offsetof(itt_global, mutex) == 56, "__itt_global layout");
_Static_assert(offsetof(itt_global, api_list_ptr) == 120, "__itt_global layout");
_Static_assert(offsetof(itt_global, state) == 160, "__itt_global layout");
_Static_assert(sizeof(itt_global) == 200, "__itt_global layout");
_Static_assert(sizeof(itt_domain) == 48 && sizeof(itt_string_handle) == 40, "ITT objects");
#endif

typedef itt_domain* (*domain_create_fn)(const char*);
typedef itt_string_handle* (*string_handle_create_fn)(const char*);
typedef void (*task_begin_fn)(const itt_domain*, itt_id, itt_id, itt_string_handle*);
typedef void (*task_end_fn)(const itt_domain*);
typedef void (*void_fn)(void);
typedef void (*frame_fn)(const itt_domain*, itt_id*);
typedef void (*marker_fn)(const itt_domain*, itt_id, itt_string_handle*, int);

/* The pointers the collector fills (NULL: no collector, the call is skipped). */
static void* p_domain_create;
static void* p_string_handle_create;
static void* p_task_begin;
static void* p_task_end;
static void* p_pause;
static void* p_resume;
static void* p_frame_begin;
static void* p_frame_end;
static void* p_marker;

static itt_api_info g_table[] = {
    {"__itt_domain_create", &p_domain_create, NULL, NULL, 1 << 12},
    {"__itt_string_handle_create", &p_string_handle_create, NULL, NULL, 1 << 12},
    {"__itt_task_begin", &p_task_begin, NULL, NULL, 1 << 12},
    {"__itt_task_end", &p_task_end, NULL, NULL, 1 << 12},
    {"__itt_pause", &p_pause, NULL, NULL, 1 << 1},
    {"__itt_resume", &p_resume, NULL, NULL, 1 << 1},
    {"__itt_frame_begin_v3", &p_frame_begin, NULL, NULL, 1 << 12},
    {"__itt_frame_end_v3", &p_frame_end, NULL, NULL, 1 << 12},
    {"__itt_marker", &p_marker, NULL, NULL, 1 << 12},
    {NULL, NULL, NULL, NULL, 0},
};
static itt_global g_global;
static pthread_mutex_t g_lists = PTHREAD_MUTEX_INITIALIZER;
static int g_bound;  // (g_lists) the handshake ran
static const char* g_path;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void itt_init(void) {
  static const unsigned char magic[8] = {0xED, 0xAB, 0xAB, 0xEC, 0x0D, 0xEE, 0xDA, 0x30};
  g_path = getenv("INTEL_LIBITTNOTIFY64");
  if (g_path == NULL) return;
  void* lib = dlopen(g_path, RTLD_LAZY);
  if (lib == NULL) return;
  void* init = dlsym(lib, "__itt_api_init");
  if (init == NULL) return;
  memcpy(g_global.magic, magic, sizeof magic);
  g_global.version_major = 3;
  g_global.version_minor = 0;
  g_global.version_build = 20250807UL;
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&g_global.mutex, &attr);
  pthread_mutexattr_destroy(&attr);
  g_global.mutex_initialized = 1;
  g_global.lib = lib;
  g_global.dll_path_ptr = &g_path;
  g_global.api_list_ptr = g_table;
  g_global.state = 4; /* init_successful */
  void (*api_init)(void*, int);
  memcpy(&api_init, &init, sizeof api_init);
  pthread_mutex_lock(&g_global.mutex);
  api_init(&g_global, -1);
  g_global.api_initialized = 1;
  pthread_mutex_unlock(&g_global.mutex);
}

static void itt_bind(void) {
  pthread_mutex_lock(&g_lists);
  itt_init();
  g_bound = 1;
  pthread_mutex_unlock(&g_lists);
}

// As ittnotify's static part: domains and string handles created before the collector is bound
// (the handshake comes with the first task or control call) are objects of the static part, on
// its global's lists, with the reserved fields 0; the program keeps passing those.

static int collector_named(void) { return getenv("INTEL_LIBITTNOTIFY64") != NULL; }

static itt_domain* itt_domain_create(const char* name) {
  pthread_mutex_lock(&g_lists);
  if (!g_bound) {
    itt_domain* d = NULL;
    if (collector_named() && (d = calloc(1, sizeof *d)) != NULL) {
      d->flags = 1;
      d->nameA = strdup(name);
      d->next = g_global.domain_list;
      g_global.domain_list = d;
    }
    pthread_mutex_unlock(&g_lists);
    return d;
  }
  pthread_mutex_unlock(&g_lists);
  domain_create_fn f;
  void* p = p_domain_create;
  if (p == NULL) return NULL;
  memcpy(&f, &p, sizeof f);
  return f(name);
}
static itt_string_handle* itt_string_handle_create(const char* name) {
  pthread_mutex_lock(&g_lists);
  if (!g_bound) {
    itt_string_handle* h = NULL;
    if (collector_named() && (h = calloc(1, sizeof *h)) != NULL) {
      h->strA = strdup(name);
      h->next = g_global.string_list;
      g_global.string_list = h;
    }
    pthread_mutex_unlock(&g_lists);
    return h;
  }
  pthread_mutex_unlock(&g_lists);
  string_handle_create_fn f;
  void* p = p_string_handle_create;
  if (p == NULL) return NULL;
  memcpy(&f, &p, sizeof f);
  return f(name);
}
static void itt_task_begin(const itt_domain* d, itt_string_handle* name) {
  static const itt_id null_id = {0, 0, 0};
  task_begin_fn f;
  void* p = (pthread_once(&g_once, itt_bind), p_task_begin);
  if (p == NULL || d == NULL || d->flags == 0) return;
  memcpy(&f, &p, sizeof f);
  f(d, null_id, null_id, name);
}
static void itt_task_end(const itt_domain* d) {
  task_end_fn f;
  void* p = (pthread_once(&g_once, itt_bind), p_task_end);
  if (p == NULL || d == NULL || d->flags == 0) return;
  memcpy(&f, &p, sizeof f);
  f(d);
}
static void itt_void_call(void** slot) {
  void_fn f;
  void* p = (pthread_once(&g_once, itt_bind), *slot);
  if (p == NULL) return;
  memcpy(&f, &p, sizeof f);
  f();
}
static void itt_frame(void** slot, const itt_domain* d) {
  frame_fn f;
  void* p = (pthread_once(&g_once, itt_bind), *slot);
  if (p == NULL || d == NULL || d->flags == 0) return;
  memcpy(&f, &p, sizeof f);
  f(d, NULL);
}
static void itt_marker(const itt_domain* d, itt_string_handle* name) {
  static const itt_id null_id = {0, 0, 0};
  marker_fn f;
  void* p = (pthread_once(&g_once, itt_bind), p_marker);
  if (p == NULL || d == NULL || d->flags == 0) return;
  memcpy(&f, &p, sizeof f);
  f(d, null_id, name, 2 /* __itt_scope_thread */);
}

/* ---- the program ---- */

static itt_domain* g_domain;
static itt_string_handle *g_conv, *g_relu;

static volatile unsigned long g_sink;
static void spin(int n) {
  for (int i = 0; i < n; ++i) g_sink += (unsigned long)i;
}

static void* worker(void* arg) {
  (void)arg;
  for (int i = 0; i < 150; ++i) {
    itt_task_begin(g_domain, g_conv);
    spin(200);
    itt_task_begin(g_domain, g_relu);
    spin(100);
    itt_task_end(g_domain);
    spin(50);
    itt_task_end(g_domain);
  }
  return NULL;
}

static int names(long n) {
  char name[64];
  for (long i = 0; i < n; ++i) {
    snprintf(name, sizeof name, "Op_%ld", i);
    itt_task_begin(g_domain, itt_string_handle_create(name));
    itt_task_end(g_domain);
  }
  return 0;
}

int main(int argc, char** argv) {
  g_domain = itt_domain_create("oneDNN");
  if (argc > 2 && strcmp(argv[1], "names") == 0) return names(atol(argv[2]));
  g_conv = itt_string_handle_create("Conv");
  g_relu = itt_string_handle_create("Relu");
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) {
    if (pthread_create(&t[i], NULL, worker, NULL) != 0) return 1;
  }
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  itt_frame(&p_frame_begin, g_domain);
  itt_frame(&p_frame_end, g_domain);
  itt_marker(g_domain, g_conv);
  itt_void_call(&p_pause);
  itt_string_handle* paused = itt_string_handle_create("Paused");
  for (int i = 0; i < 5; ++i) {
    itt_task_begin(g_domain, paused);
    itt_task_end(g_domain);
  }
  itt_void_call(&p_resume);
  itt_task_end(g_domain); /* no task open: counted by the collector */
  return 0;
}
