// Plain CUDA C reference for the probe's transfer figures (docs/reference-figures.md section 4 method):
// cudaMemcpyAsync timed with events, warm-up first, median of N samples.
// Build: nvcc -O2 -o memcpy_ref benchmarks/memcpy_ref.cu ; run: ./memcpy_ref [MiB] [samples]
// Prints one line per figure: name GB/s (1e9 bytes/s; d2d counts read + write).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1); } } while (0)

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Time `samples` copies of `bytes` (after 2 warm-ups); returns median GB/s times `factor`.
static double time_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                        int samples, double factor, cudaStream_t s) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 2; i++) CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s));
  CHECK(cudaStreamSynchronize(s));
  std::vector<double> rates;
  for (int i = 0; i < samples; i++) {
    CHECK(cudaEventRecord(a, s));
    CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    rates.push_back(factor * bytes / (ms / 1e3) / 1e9);
  }
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return median(rates);
}

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], 0, 10) : 1024;
  int samples = argc > 2 ? atoi(argv[2]) : 10;
  size_t bytes = mib << 20;
  void *h_pinned, *h_pinned2, *d_a, *d_b;
  CHECK(cudaMallocHost(&h_pinned, bytes));
  CHECK(cudaMallocHost(&h_pinned2, bytes));
  void* h_pageable = malloc(bytes);
  CHECK(cudaMalloc(&d_a, bytes));
  CHECK(cudaMalloc(&d_b, bytes));
  // non-zero content everywhere (pages touched, no zero-page shortcuts)
  for (size_t i = 0; i < bytes; i += 4096) {
    ((char*)h_pinned)[i] = (char)i; ((char*)h_pinned2)[i] = (char)i; ((char*)h_pageable)[i] = (char)i;
  }
  memset(h_pageable, 0x5a, bytes);
  CHECK(cudaMemcpy(d_a, h_pinned, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_b, h_pinned, bytes, cudaMemcpyHostToDevice));
  cudaStream_t s, s2;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));

  printf("h2d_pinned %.2f\n", time_copy(d_a, h_pinned, bytes, cudaMemcpyHostToDevice, samples, 1, s));
  printf("d2h_pinned %.2f\n", time_copy(h_pinned, d_a, bytes, cudaMemcpyDeviceToHost, samples, 1, s));
  printf("h2d_pageable %.2f\n", time_copy(d_a, h_pageable, bytes, cudaMemcpyHostToDevice, samples, 1, s));
  printf("d2h_pageable %.2f\n", time_copy(h_pageable, d_a, bytes, cudaMemcpyDeviceToHost, samples, 1, s));
  printf("d2d %.2f\n", time_copy(d_b, d_a, bytes, cudaMemcpyDeviceToDevice, samples, 2, s));

  // bidirectional: H2D on s, D2H on s2, both after one start event; summed bytes
  cudaEvent_t st, e1, e2;
  CHECK(cudaEventCreate(&st)); CHECK(cudaEventCreate(&e1)); CHECK(cudaEventCreate(&e2));
  std::vector<double> rates;
  for (int i = 0; i < samples + 2; i++) {
    CHECK(cudaEventRecord(st, s));
    CHECK(cudaStreamWaitEvent(s2, st, 0));
    CHECK(cudaMemcpyAsync(d_a, h_pinned, bytes, cudaMemcpyHostToDevice, s));
    CHECK(cudaMemcpyAsync(h_pinned2, d_b, bytes, cudaMemcpyDeviceToHost, s2));
    CHECK(cudaEventRecord(e1, s)); CHECK(cudaEventRecord(e2, s2));
    CHECK(cudaEventSynchronize(e1)); CHECK(cudaEventSynchronize(e2));
    float m1 = 0, m2 = 0;
    CHECK(cudaEventElapsedTime(&m1, st, e1)); CHECK(cudaEventElapsedTime(&m2, st, e2));
    if (i >= 2) rates.push_back(2.0 * bytes / (std::max(m1, m2) / 1e3) / 1e9);
  }
  printf("bidir_pinned %.2f\n", median(rates));
  return 0;
}
