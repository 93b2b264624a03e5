/*
** safetensors.h: checkpoint files in the safetensors layout: an 8-byte
** little-endian header length N, N bytes of JSON, then raw little-endian
** tensor data. The JSON is built and checked by the caller; this file moves
** bytes, atomically when writing and with every bound checked when reading.
*/
#ifndef BBB_SAFETENSORS_H
#define BBB_SAFETENSORS_H

#include <stdint.h>

#include "tensor.h"

/* Headers larger than this are refused before anything is allocated. */
#define BBB_ST_MAX_HEADER ((uint64_t)64 << 20)

/* Writes header then the data of tensors[0..n) in order to a temporary file
** in path's folder, flushes and fsyncs it, renames it over path and fsyncs
** the folder. On any failure the temporary file is removed and path is left
** as it was. */
int bbb_st_save(const char *path, const char *header, uint64_t header_len,
                bbb_tensor *const *tensors, int n);

/* Reads the header of path: *header (malloc'd, NUL-terminated, caller
** frees), its length, and the size of the data section after it. */
int bbb_st_read_header(const char *path, char **header, uint64_t *header_len,
                       uint64_t *data_len);

/* Reads bytes [begin, end) of the data section (which starts at
** data_start) as float32 into a new tensor of the given shape; the byte
** count must be 4 * numel and the range inside the file. */
int bbb_st_read_tensor(bbb_tensor **out, const char *path, uint64_t data_start,
                       uint64_t begin, uint64_t end, int ndim, const int64_t *shape);

#endif
