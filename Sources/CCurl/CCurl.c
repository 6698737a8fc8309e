#include "CCurl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The few libcurl declarations used here (stable ABI since libcurl 7; no development headers needed).
typedef void CURL;
struct curl_slist;
typedef int CURLcode;
typedef int64_t curl_off_t;
enum {
    CURLE_OK = 0, CURLE_COULDNT_RESOLVE_PROXY = 5, CURLE_COULDNT_RESOLVE_HOST = 6, CURLE_COULDNT_CONNECT = 7,
    CURLE_OPERATION_TIMEDOUT = 28, CURLE_SSL_CONNECT_ERROR = 35, CURLE_ABORTED_BY_CALLBACK = 42,
    CURLE_PEER_FAILED_VERIFICATION = 60, CURLE_SSL_CERTPROBLEM = 58, CURLE_SSL_CIPHER = 59,
    CURLE_SSL_CACERT_BADFILE = 77, CURLE_SSL_ISSUER_ERROR = 83,
};
enum {
    CURLOPT_WRITEDATA = 10001, CURLOPT_URL = 10002, CURLOPT_ERRORBUFFER = 10010, CURLOPT_HTTPHEADER = 10023,
    CURLOPT_HEADERDATA = 10029, CURLOPT_CUSTOMREQUEST = 10036, CURLOPT_XFERINFODATA = 10057,
    CURLOPT_POSTFIELDS = 10015, CURLOPT_WRITEFUNCTION = 20011, CURLOPT_HEADERFUNCTION = 20079,
    CURLOPT_XFERINFOFUNCTION = 20219, CURLOPT_POSTFIELDSIZE_LARGE = 30120, CURLOPT_NOPROGRESS = 43,
    CURLOPT_POST = 47, CURLOPT_NOSIGNAL = 99, CURLOPT_TIMEOUT_MS = 155, CURLOPT_PROTOCOLS = 181,
    CURLOPT_REDIR_PROTOCOLS = 182, CURLOPT_HTTPGET = 80,
};
enum { CURLINFO_RESPONSE_CODE = 0x200002 };
enum { CURLPROTO_HTTP = 1, CURLPROTO_HTTPS = 2 };
enum { CURL_GLOBAL_DEFAULT = 3 };

static struct {
    void *library;
    CURLcode (*global_init)(long);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, int, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, int, ...);
    void (*easy_cleanup)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    char load_error[200];
} curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load_curl(void) {
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        snprintf(curl.load_error, sizeof curl.load_error, "%s", dlerror());
        return;
    }
#define RESOLVE(field, symbol) \
    if (!(*(void **)&curl.field = dlsym(library, symbol))) { \
        snprintf(curl.load_error, sizeof curl.load_error, "libcurl.so.4 has no %s", symbol); \
        dlclose(library); \
        return; \
    }
    RESOLVE(global_init, "curl_global_init")
    RESOLVE(easy_init, "curl_easy_init")
    RESOLVE(easy_setopt, "curl_easy_setopt")
    RESOLVE(easy_perform, "curl_easy_perform")
    RESOLVE(easy_getinfo, "curl_easy_getinfo")
    RESOLVE(easy_cleanup, "curl_easy_cleanup")
    RESOLVE(easy_strerror, "curl_easy_strerror")
    RESOLVE(slist_append, "curl_slist_append")
    RESOLVE(slist_free_all, "curl_slist_free_all")
#undef RESOLVE
    if (curl.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(curl.load_error, sizeof curl.load_error, "curl_global_init failed");
        dlclose(library);
        return;
    }
    curl.library = library;
}

typedef struct {
    char *bytes;
    size_t length;
    size_t capacity;
    int failed;
} buffer;

static size_t append(char *data, size_t size, size_t count, void *context) {
    buffer *target = context;
    size_t length = size * count;
    if (target->length + length + 1 > target->capacity) {
        size_t capacity = target->capacity ? target->capacity : 4096;
        while (capacity < target->length + length + 1) capacity *= 2;
        char *grown = realloc(target->bytes, capacity);
        if (!grown) {
            target->failed = 1;
            return 0;  // libcurl stops with CURLE_WRITE_ERROR
        }
        target->bytes = grown;
        target->capacity = capacity;
    }
    memcpy(target->bytes + target->length, data, length);
    target->length += length;
    target->bytes[target->length] = 0;
    return length;
}

static int progress(void *context, curl_off_t download_total, curl_off_t downloaded, curl_off_t upload_total, curl_off_t uploaded) {
    (void)download_total; (void)downloaded; (void)upload_total; (void)uploaded;
    const int *flag = context;
    return flag && __atomic_load_n(flag, __ATOMIC_ACQUIRE) ? 1 : 0;  // nonzero aborts
}

static ccurl_error classify(CURLcode code) {
    switch (code) {
    case CURLE_OK: return ccurl_ok;
    case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_RESOLVE_PROXY: return ccurl_host_not_found;
    case CURLE_COULDNT_CONNECT: return ccurl_refused;
    case CURLE_OPERATION_TIMEDOUT: return ccurl_timed_out;
    case CURLE_SSL_CONNECT_ERROR: case CURLE_PEER_FAILED_VERIFICATION: case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER: case CURLE_SSL_CACERT_BADFILE: case CURLE_SSL_ISSUER_ERROR: return ccurl_tls_failed;
    case CURLE_ABORTED_BY_CALLBACK: return ccurl_canceled;
    default: return ccurl_failed;
    }
}

ccurl_error ccurl_perform(const ccurl_request *request, ccurl_response *response) {
    memset(response, 0, sizeof *response);
    pthread_once(&load_once, load_curl);
    if (!curl.library) {
        snprintf(response->message, sizeof response->message, "cannot load libcurl (%s); install libcurl4", curl.load_error);
        return ccurl_unavailable;
    }
    CURL *handle = curl.easy_init();
    if (!handle) {
        snprintf(response->message, sizeof response->message, "curl_easy_init failed (out of memory?)");
        return ccurl_failed;
    }
    struct curl_slist *headers = NULL;
    for (size_t index = 0; index < request->header_count; index++) headers = curl.slist_append(headers, request->headers[index]);
    headers = curl.slist_append(headers, "Expect:");  // no 100-continue round trip before a form body
    buffer body = {0}, header_lines = {0};
    char error_text[256] = "";

    curl.easy_setopt(handle, CURLOPT_URL, request->url);
    curl.easy_setopt(handle, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl.easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl.easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for DNS timeouts: other threads run here
    curl.easy_setopt(handle, CURLOPT_TIMEOUT_MS, request->timeout_ms);
    curl.easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
    curl.easy_setopt(handle, CURLOPT_ERRORBUFFER, error_text);
    curl.easy_setopt(handle, CURLOPT_WRITEFUNCTION, append);
    curl.easy_setopt(handle, CURLOPT_WRITEDATA, &body);
    curl.easy_setopt(handle, CURLOPT_HEADERFUNCTION, append);
    curl.easy_setopt(handle, CURLOPT_HEADERDATA, &header_lines);
    curl.easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);
    curl.easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, progress);
    curl.easy_setopt(handle, CURLOPT_XFERINFODATA, (void *)request->cancel_flag);
    if (request->body) {
        curl.easy_setopt(handle, CURLOPT_POST, 1L);
        curl.easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)request->body_length);
        curl.easy_setopt(handle, CURLOPT_POSTFIELDS, request->body);
    } else {
        curl.easy_setopt(handle, CURLOPT_HTTPGET, 1L);
    }
    if (strcmp(request->method, "GET") != 0 && strcmp(request->method, "POST") != 0) {
        curl.easy_setopt(handle, CURLOPT_CUSTOMREQUEST, request->method);
    }

    CURLcode code = curl.easy_perform(handle);
    ccurl_error result = classify(code);
    if (code == CURLE_OK) {
        curl.easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &response->status);
    } else if (body.failed || header_lines.failed) {
        snprintf(response->message, sizeof response->message, "out of memory for the response");
        result = ccurl_failed;
    } else {
        snprintf(response->message, sizeof response->message, "%s", error_text[0] ? error_text : curl.easy_strerror(code));
    }
    curl.easy_cleanup(handle);
    curl.slist_free_all(headers);
    response->body = body.bytes;
    response->body_length = body.length;
    response->headers = header_lines.bytes;
    response->headers_length = header_lines.length;
    return result;
}

void ccurl_response_free(ccurl_response *response) {
    free(response->body);
    free(response->headers);
    response->body = NULL;
    response->headers = NULL;
}

void ccurl_cancel(int *flag) { __atomic_store_n(flag, 1, __ATOMIC_RELEASE); }
