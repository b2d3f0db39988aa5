/*
 * info.h - `ember info`: a readable report of a GGUF file (header, metadata, tensor table) and,
 * when it loads as a Qwen3 model, its hyper-parameters, parameter count and bits per weight; for a
 * DFlash draft (arch dflash), its layers, target layers, block size and mask token.
 * The user's first check of a model file; corrupt files give the reader's precise error.
 */
#ifndef EMBER_INFO_H
#define EMBER_INFO_H

#include <stdio.h>

/* Prints the report for `path` to `out`. Returns 0 when the file is valid GGUF and loads as a
 * model, 1 when the GGUF itself is invalid (message in ember_error_last()), 2 when the GGUF is
 * valid but ember cannot run it as a model (the reason is printed in the report). */
int ember_info_print(FILE *out, const char *path);

#endif
