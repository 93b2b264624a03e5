/*
** io.h: reading data files. IDX (the MNIST format), raw or gzipped.
*/
#ifndef BBB_IO_H
#define BBB_IO_H

#include "tensor.h"

/* Loads an IDX file of unsigned bytes as floats: byte * scale + offset.
** At most limit items (the first dimension; limit < 0: all). Every header
** field is checked; a short or malformed file is an error, never a crash. */
int bbb_idx_load(bbb_tensor **out, const char *path, double scale, double offset, int64_t limit);

#endif
