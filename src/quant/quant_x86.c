/* quant_x86.c — placeholder (SIMD kernels follow). */
#include "quant_internal.h"
int quant_x86_install(quant_kernels *k) { (void)k; return QUANT_SIMD_SCALAR; }
