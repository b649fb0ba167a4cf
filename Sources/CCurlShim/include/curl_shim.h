#ifndef LENDER_CURL_SHIM_H
#define LENDER_CURL_SHIM_H
#include <stddef.h>

/// Sends one message over SMTP with libcurl (`smtp://` or `smtps://`, credentials in the
/// URL allowed; STARTTLS when the server offers it on `smtp://`). `data` is the whole
/// message, headers and body, CRLF line ends. Returns 0 on success, else libcurl's code,
/// with its words in `error` (at most `error_size` bytes, NUL-ended). Blocks: call it off
/// the event loops.
int lender_smtp_send(const char *url, const char *from, const char *to, const char *data, size_t length,
                     long timeout_seconds, char *error, size_t error_size);

#endif
