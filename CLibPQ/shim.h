#ifndef LENDER_CLIBPQ_SHIM_H
#define LENDER_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
