#ifndef LENDER_CVIPS_SHIM_H
#define LENDER_CVIPS_SHIM_H
#include <vips/vips.h>
#endif
