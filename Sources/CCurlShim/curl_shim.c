#include "curl_shim.h"
#include <curl/curl.h>
#include <pthread.h>
#include <string.h>

// libcurl's variadic curl_easy_setopt cannot be called from Swift: one fixed-argument call
// does the whole send.

static pthread_once_t initialised = PTHREAD_ONCE_INIT;
static void initialise(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

struct upload {
    const char *data;
    size_t left;
};

static size_t read_message(char *buffer, size_t size, size_t count, void *context) {
    struct upload *upload = context;
    size_t room = size * count;
    size_t n = upload->left < room ? upload->left : room;
    memcpy(buffer, upload->data, n);
    upload->data += n;
    upload->left -= n;
    return n;
}

int lender_smtp_send(const char *url, const char *from, const char *to, const char *data, size_t length,
                     long timeout_seconds, char *error, size_t error_size) {
    pthread_once(&initialised, initialise);
    if (error_size > 0) error[0] = 0;
    CURL *curl = curl_easy_init();
    if (!curl) {
        if (error_size > 0) strncpy(error, "curl_easy_init failed", error_size - 1);
        return CURLE_FAILED_INIT;
    }
    char buffer[CURL_ERROR_SIZE];
    buffer[0] = 0;
    struct curl_slist *recipients = curl_slist_append(NULL, to);
    struct upload upload = {data, length};
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_MAIL_FROM, from);
    curl_easy_setopt(curl, CURLOPT_MAIL_RCPT, recipients);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, read_message);
    curl_easy_setopt(curl, CURLOPT_READDATA, &upload);
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_USE_SSL, (long)CURLUSESSL_TRY);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, timeout_seconds);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, buffer);
    CURLcode code = curl_easy_perform(curl);
    if (code != CURLE_OK && error_size > 0) {
        const char *words = buffer[0] ? buffer : curl_easy_strerror(code);
        strncpy(error, words, error_size - 1);
        error[error_size - 1] = 0;
    }
    curl_slist_free_all(recipients);
    curl_easy_cleanup(curl);
    return (int)code;
}
