/*
** fuzz_safetensors.c: libFuzzer harness for the checkpoint reader's C half
** (src/io/safetensors.c), header, duplicate-key walk and tensor reads.
** The input's first 24 bytes choose the byte range
** and the shape asked for, as a hostile header would; the rest is the file.
** Any bytes must give a tensor or an error status, never a crash, a leak,
** undefined behaviour or an allocation larger than the file.
** Seeds: tests/fuzz/corpus/safetensors/.
*/
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/safetensors.h"

static uint64_t u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int k = 0; k < 8; k++) v |= (uint64_t)p[k] << (8 * k);
  return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 24) return 0;
  uint64_t begin = u64(data), end = u64(data + 8);
  int ndim = data[16] % 8;   /* 7 is beyond BBB_MAXDIM on purpose */
  int64_t shape[8];
  for (int d = 0; d < ndim && d < 8; d++) shape[d] = (int8_t)data[17 + d % 7] * (d + 1);
  int fd = memfd_create("ckpt", 0);
  if (fd < 0) return 0;
  if (write(fd, data + 24, size - 24) != (ssize_t)(size - 24)) { close(fd); return 0; }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  char *header = NULL, dup[32];
  uint64_t hl = 0, dl = 0;
  bbb_st_file f;
  if (bbb_st_open(&f, path) == BBB_OK && bbb_st_read_header(&f, path, &header, &hl, &dl) == BBB_OK) {
    volatile size_t n = strlen(header);   /* NUL-terminated within hl + 1 */
    (void)n;
    int found = 0;
    bbb_st_duplicate_key(header, (size_t)hl, &found, dup, sizeof dup);
    bbb_tensor *t = NULL;
    if (bbb_st_read_tensor(&t, &f, path, "fuzz", 8 + hl, begin, end, ndim, shape) == BBB_OK) {
      volatile float s = 0;
      for (int64_t i = 0; i < t->numel; i++) s += bbb_data(t)[i];
      bbb_tensor_release(t);
    }
    free(header);
  }
  bbb_st_close(&f);
  close(fd);
  return 0;
}
