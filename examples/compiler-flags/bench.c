/* compiler-flags: the program whose compiled speed is measured. PROTECTED.
 *
 * Usage: bench SEED SIZE. Four kernels on inputs made from SEED, one output line each:
 *   matmul  the sum of C = A * B for SIZE x SIZE doubles (loops in i-k-j order)
 *   dot     the sum of 8 * SIZE dot products of vectors of 4096 doubles, each summed in order
 *   sort    a hash of 4 * SIZE * SIZE numbers after a hand-written quicksort
 *   collatz the total Collatz steps of SIZE * SIZE numbers from a random start
 * The output must not change with the flags: doubles are printed with every bit (%a), so a
 * flag that reorders floating-point sums (-ffast-math, -Ofast) shows.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t state;

static uint64_t next(void) { /* xorshift64* */
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 2685821657736338717ULL;
}

static double uniform(void) { return (double)(next() >> 11) / 9007199254740992.0 - 0.5; }

static void matmul(int n, const double *a, const double *b, double *c) {
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) c[i * n + j] = 0.0;
    for (int k = 0; k < n; k++) {
      double aik = a[i * n + k];
      for (int j = 0; j < n; j++) c[i * n + j] += aik * b[k * n + j];
    }
  }
}

static double dot(int len, const double *x, const double *y) {
  double s = 0.0;
  for (int i = 0; i < len; i++) s += x[i] * y[i];
  return s;
}

static void quicksort(uint32_t *v, long lo, long hi) {
  while (hi - lo > 16) {
    uint32_t pivot = v[lo + (hi - lo) / 2];
    long i = lo, j = hi;
    while (i <= j) {
      while (v[i] < pivot) i++;
      while (v[j] > pivot) j--;
      if (i <= j) {
        uint32_t t = v[i];
        v[i++] = v[j];
        v[j--] = t;
      }
    }
    if (j - lo < hi - i) {
      quicksort(v, lo, j);
      lo = i;
    } else {
      quicksort(v, i, hi);
      hi = j;
    }
  }
  for (long i = lo + 1; i <= hi; i++) { /* insertion sort for the short rest */
    uint32_t t = v[i];
    long j = i - 1;
    while (j >= lo && v[j] > t) {
      v[j + 1] = v[j];
      j--;
    }
    v[j + 1] = t;
  }
}

static uint64_t collatz(uint64_t start, long count) {
  uint64_t total = 0;
  for (long i = 0; i < count; i++) {
    uint64_t x = start + (uint64_t)i;
    while (x != 1) {
      x = (x & 1) ? 3 * x + 1 : x >> 1;
      total++;
    }
  }
  return total;
}

static uint64_t fnv1a(const unsigned char *p, size_t len) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

#define DOT_LEN 4096

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: bench SEED SIZE\n");
    return 2;
  }
  state = strtoull(argv[1], NULL, 10) * 0x9E3779B97F4A7C15ULL + 1;
  int n = atoi(argv[2]);
  if (n < 1 || n > 1000) {
    fprintf(stderr, "bench: SIZE must be 1..1000\n");
    return 2;
  }
  long nn = (long)n * n, ns = 4 * nn;
  double *a = malloc(sizeof(double) * nn), *b = malloc(sizeof(double) * nn);
  double *c = malloc(sizeof(double) * nn);
  double *x = malloc(sizeof(double) * DOT_LEN), *y = malloc(sizeof(double) * DOT_LEN);
  uint32_t *v = malloc(sizeof(uint32_t) * ns);
  if (!a || !b || !c || !x || !y || !v) {
    fprintf(stderr, "bench: out of memory\n");
    return 1;
  }
  for (long i = 0; i < nn; i++) a[i] = uniform();
  for (long i = 0; i < nn; i++) b[i] = uniform();
  for (long i = 0; i < DOT_LEN; i++) x[i] = uniform();
  for (long i = 0; i < DOT_LEN; i++) y[i] = uniform();
  for (long i = 0; i < ns; i++) v[i] = (uint32_t)(next() >> 32);

  matmul(n, a, b, c);
  double sum = 0.0;
  for (long i = 0; i < nn; i++) sum += c[i];
  printf("matmul %a\n", sum);

  double dots = 0.0;
  for (int r = 0; r < 8 * n; r++) {
    dots += dot(DOT_LEN, x, y);
    x[r % DOT_LEN] += 1.0 / 1024; /* a new product each round */
  }
  printf("dot %a\n", dots);

  quicksort(v, 0, ns - 1);
  printf("sort %016llx\n", (unsigned long long)fnv1a((const unsigned char *)v, sizeof(uint32_t) * ns));
  printf("collatz %llu\n", (unsigned long long)collatz(1 + next() % 1000000, nn));
  free(a);
  free(b);
  free(c);
  free(x);
  free(y);
  free(v);
  return 0;
}
