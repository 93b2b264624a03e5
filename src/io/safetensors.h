/*
** safetensors.h: checkpoint files in the safetensors layout: an 8-byte
** little-endian header length N, N bytes of JSON, then raw little-endian
** tensor data. The JSON is built and checked by the caller; this file moves
** bytes, atomically when writing and with every bound checked when reading.
*/
#ifndef BBB_SAFETENSORS_H
#define BBB_SAFETENSORS_H

#include <stdint.h>

#include "engine/tensor.h"

/* Headers larger than this are refused before anything is allocated. */
#define BBB_ST_MAX_HEADER ((uint64_t)64 << 20)

/* Writes header then the data of tensors[0..n) in order to a temporary file
** in path's folder, flushes and fsyncs it, renames it over path and fsyncs
** the folder. On any failure the temporary file is removed and path is left
** as it was. */
int bbb_st_save(const char *path, const char *header, uint64_t header_len,
                bbb_tensor *const *tensors, int n);

/* A checkpoint open for reading: every read of one load goes through this
** one descriptor, so a file replaced (renamed over) while it is being read
** cannot mix two files' bytes. size is the size when it was opened. */
typedef struct { int fd; uint64_t size; } bbb_st_file;

/* Opens a regular file (stat first: a FIFO is refused, never opened for a
** blocking read). bbb_st_close may be called on a failed or closed file. */
int bbb_st_open(bbb_st_file *f, const char *path);
void bbb_st_close(bbb_st_file *f);

/* Reads the header: *header (malloc'd, NUL-terminated, caller frees), its
** length, and the size of the data section after it. The header length is
** bounded by the file size before anything is allocated. path is for
** messages. */
int bbb_st_read_header(const bbb_st_file *f, const char *path, char **header,
                       uint64_t *header_len, uint64_t *data_len);

/* Reads bytes [begin, end) of the data section (which starts at
** data_start) as float32 into a new tensor of the given shape; the byte
** count must be 4 * numel and the range inside the file, checked before the
** tensor is allocated. A NaN or infinity among the values is an error
** (BBB_EVALUE) naming the tensor (name) and the element. */
int bbb_st_read_tensor(bbb_tensor **out, const bbb_st_file *f, const char *path,
                       const char *name, uint64_t data_start, uint64_t begin, uint64_t end,
                       int ndim, const int64_t *shape);

/* *found = 1 when some JSON object in json[0..n) names a key twice (the
** key, cut to dupn - 1 bytes, is left in dup), 0 when none does or the text
** is not well-formed JSON (the decoder reports that). Keys compare after
** their escapes are decoded ("a" is the same key as "\u0061"). */
int bbb_st_duplicate_key(const char *json, size_t n, int *found, char *dup, size_t dupn);

#endif
