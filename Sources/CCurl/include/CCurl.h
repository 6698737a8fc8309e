// One blocking HTTP exchange through libcurl, which is loaded with dlopen on first use: programs that link
// this never load libcurl (and the thirty libraries it needs) unless they send a request.
#ifndef CCURL_H
#define CCURL_H

#include <stddef.h>

/// What went wrong, when a request got no response.
typedef enum {
    ccurl_ok = 0,
    ccurl_unavailable,     ///< libcurl.so.4 could not be loaded
    ccurl_refused,         ///< connection refused or no route
    ccurl_timed_out,
    ccurl_host_not_found,
    ccurl_tls_failed,
    ccurl_canceled,        ///< the cancel flag was raised
    ccurl_failed,          ///< any other failure (message says which)
} ccurl_error;

typedef struct {
    const char *method;               ///< "GET", "POST", …
    const char *url;
    const char *const *headers;       ///< "Name: value" lines
    size_t header_count;
    const void *body;                 ///< may be NULL
    size_t body_length;
    long timeout_ms;                  ///< whole exchange
    const int *cancel_flag;           ///< nonzero (set with ccurl_cancel) aborts the exchange
} ccurl_request;

typedef struct {
    long status;
    char *headers;                    ///< the raw header lines of every response received (malloc'd)
    size_t headers_length;
    char *body;                       ///< malloc'd
    size_t body_length;
    char message[256];                ///< libcurl's description of an error
} ccurl_response;

/// Performs `request`; fills `response` (free it with ccurl_response_free, whatever the result).
ccurl_error ccurl_perform(const ccurl_request *request, ccurl_response *response);

/// Frees what ccurl_perform allocated in `response`.
void ccurl_response_free(ccurl_response *response);

/// Raises a cancel flag from any thread.
void ccurl_cancel(int *flag);

#endif
