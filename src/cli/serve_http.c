/* serve_http.c - the HTTP side of `selectivbench serve` (serve.h), on Debian's
 * libmicrohttpd: bound to 127.0.0.1 only, one thread answering one request at a time (so the
 * figures' state needs no lock), a bounded number of connections, short timeouts and a
 * small memory pool per connection.
 *
 * Every request is checked before it is routed: GET or HEAD (else 405), a query string of
 * at most QUERY_MAX bytes (else 414; libmicrohttpd itself answers 414 to a request line
 * that does not fit the connection's memory), percent escapes that are well formed (else
 * 400), no control byte, sent or encoded (else 400: "%00" would cut the path libmicrohttpd
 * decodes), a Host of this server (else 400: a page of another site that renamed itself to
 * 127.0.0.1 cannot read the dashboard). Paths are looked up in fixed tables, never joined
 * to a folder: a path that is not one of them is a 404, "../" included. */
#include <arpa/inet.h>
#include <ctype.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/serve.h"
#include "cli/web_assets.h"

#define QUERY_MAX 4096    /* bytes of a query string */
#define PATH_MAX_LEN 1024 /* bytes of a path */
#define MAX_ARGUMENTS 16  /* query parameters */
/* Connections at once: enough that clients which stall or close mid-request never fill the
 * table (64 did: 100 connections dropped mid-request made the next request wait for their
 * timeout), within the process's file limit. More wait in the kernel's queue. */
#define MAX_CONNECTIONS 512
#define CONNECTION_TIMEOUT 10         /* seconds a silent connection is kept */
#define CONNECTION_MEMORY (32 * 1024) /* per connection: request line, headers, reply head */

struct sb_serve_http {
    struct MHD_Daemon *daemon;
    sb_serve *serve;
    _Atomic int port; /* the port bound (known after the start with --port 0) */
};

/* What is known of a request from its raw URI, before libmicrohttpd decodes it. */
typedef struct request_info {
    size_t path_len, query_len;
    int bad_escape; /* a '%' not followed by two hex digits */
    int control;    /* a control byte, sent or percent-encoded (%00-%1F, %7F) */
} request_info;

/* ---- checks on the raw request ---- */

static int escapes_well_formed(const char *s)
{
    for (; *s != '\0'; s++)
        if (*s == '%' && !(isxdigit((unsigned char)s[1]) && isxdigit((unsigned char)s[2])))
            return 0;
    return 1;
}

static int hex_value(char c)
{
    return isdigit((unsigned char)c) ? c - '0' : tolower((unsigned char)c) - 'a' + 10;
}

/* Whether the URI holds a control byte, as sent or percent-encoded: libmicrohttpd decodes
 * "%00" into a NUL that ends the path it hands on, so "/index.html%00.svg" would be read as
 * "/index.html". No path or query of the dashboard has one. (Escapes are well formed.) */
static int has_control(const char *s)
{
    for (; *s != '\0'; s++) {
        int c = (unsigned char)*s;
        if (*s == '%' && isxdigit((unsigned char)s[1]) && isxdigit((unsigned char)s[2])) {
            c = hex_value(s[1]) * 16 + hex_value(s[2]);
            s += 2;
        }
        if (c < 0x20 || c == 0x7f)
            return 1;
    }
    return 0;
}

/* libmicrohttpd's URI callback: sees the URI as sent; its result is the request's state. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *connection)
{
    (void)cls;
    (void)connection;
    request_info *info = calloc(1, sizeof *info);
    if (info == NULL)
        return NULL;
    const char *query = strchr(uri, '?');
    info->path_len = query != NULL ? (size_t)(query - uri) : strlen(uri);
    info->query_len = query != NULL ? strlen(query + 1) : 0;
    info->bad_escape = !escapes_well_formed(uri);
    info->control = !info->bad_escape && has_control(uri);
    return info;
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                         enum MHD_RequestTerminationCode code)
{
    (void)cls;
    (void)connection;
    (void)code;
    free(*req_cls);
    *req_cls = NULL;
}

/* Whether the Host header names this server (127.0.0.1 or localhost, on its port). */
static int host_ok(struct MHD_Connection *connection, int port)
{
    const char *host =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (host == NULL)
        return 1; /* HTTP/1.0 clients may leave it out */
    char want[2][64];
    snprintf(want[0], sizeof want[0], "127.0.0.1:%d", port);
    snprintf(want[1], sizeof want[1], "localhost:%d", port);
    return strcmp(host, want[0]) == 0 || strcmp(host, want[1]) == 0;
}

static enum MHD_Result count_argument(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
    (void)kind;
    (void)key;
    (void)value;
    (*(int *)cls)++;
    return MHD_YES;
}

/* ---- sending ---- */

static enum MHD_Result send_reply(struct MHD_Connection *connection, sb_serve_reply *r,
                                  const char *allow)
{
    struct MHD_Response *response = NULL;
    if (r->fd >= 0) {
        struct stat st;
        if (fstat(r->fd, &st) == 0)
            response = MHD_create_response_from_fd((uint64_t)st.st_size, r->fd);
        if (response == NULL)
            close(r->fd);
    } else {
        response = MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
        if (response == NULL)
            free(r->body);
    }
    if (response == NULL)
        return MHD_NO; /* out of memory: libmicrohttpd closes the connection */
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, r->type);
    MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(response, "Referrer-Policy", "no-referrer");
    /* the page loads nothing from anywhere else, and runs no inline script */
    MHD_add_response_header(response, "Content-Security-Policy",
                            "default-src 'self'; img-src 'self'; style-src 'self'; "
                            "script-src 'self'; connect-src 'self'; frame-ancestors 'none'");
    if (allow != NULL)
        MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result result = MHD_queue_response(connection, r->status, response);
    MHD_destroy_response(response);
    return result;
}

/* ---- routing ---- */

/* The embedded file of the page at this path ("/" is index.html), or NULL. */
static const sb_web_asset *find_asset(const char *url)
{
    if (strcmp(url, "/") == 0)
        url = "/index.html";
    for (const sb_web_asset *a = sb_web_assets; a->path != NULL; a++)
        if (strcmp(a->path, url) == 0)
            return a;
    return NULL;
}

static const char *asset_type(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (dot != NULL && strcmp(dot, ".js") == 0)
        return "text/javascript; charset=utf-8";
    if (dot != NULL && strcmp(dot, ".css") == 0)
        return "text/css; charset=utf-8";
    return "text/html; charset=utf-8";
}

/* "/figures/NAME.svg" with NAME of letters, digits, '_' and '-': NAME into name[size]. */
static int figure_name(const char *url, char *name, size_t size)
{
    const char *prefix = "/figures/";
    size_t plen = strlen(prefix), len = strlen(url);
    if (strncmp(url, prefix, plen) != 0 || len < plen + 5 || strcmp(url + len - 4, ".svg") != 0)
        return 0;
    size_t n = len - plen - 4;
    if (n >= size)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = url[plen + i];
        if (!isalnum((unsigned char)c) && c != '_' && c != '-')
            return 0;
    }
    snprintf(name, size, "%.*s", (int)n, url + plen);
    return 1;
}

/* Answers one checked GET (or HEAD) request into r. */
static void route(sb_serve *s, struct MHD_Connection *connection, const char *url,
                  sb_serve_reply *r)
{
    char name[64];
    const sb_web_asset *asset = find_asset(url);
    if (asset != NULL) {
        r->status = 200;
        r->type = asset_type(asset->path);
        r->body = malloc(asset->size > 0 ? asset->size : 1);
        if (r->body == NULL) {
            sb_serve_reply_error(r, 500, "out of memory");
            return;
        }
        memcpy(r->body, asset->data, asset->size);
        r->len = asset->size;
    } else if (strcmp(url, "/api/runs") == 0) {
        sb_serve_runs(s->db_path, r);
    } else if (strcmp(url, "/api/groups") == 0) {
        sb_serve_groups(s->db_path,
                        MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "group"),
                        MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "runs"), r);
    } else if (strcmp(url, "/api/status") == 0) {
        sb_serve_status(s->db_path, r);
    } else if (strcmp(url, "/api/figures") == 0) {
        sb_serve_figures_list(s, r);
    } else if (strcmp(url, "/api/curve") == 0) {
        sb_serve_curve(s->db_path,
                       MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "run"), r);
    } else if (strcmp(url, "/api/run") == 0) {
        sb_serve_run(s->db_path,
                     MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "run"), r);
    } else if (strcmp(url, "/api/probe") == 0) {
        sb_serve_probe_figure(
            s->db_path, MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "run"),
            MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "figure"), r);
    } else if (figure_name(url, name, sizeof name)) {
        sb_serve_figure(s, name, r);
    } else {
        sb_serve_reply_error(r, 404, "no such page (the dashboard is at /)");
    }
}

/* The checks every request passes before it is routed: 0 when it passed, else the status
 * of its error, with the message in *why. */
static unsigned check_request(const sb_serve_http *h, struct MHD_Connection *connection,
                              const char *method, const request_info *info, const char **why)
{
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        *why = "only GET and HEAD are served: the dashboard never changes anything";
        return 405;
    }
    if (info->query_len > QUERY_MAX || info->path_len > PATH_MAX_LEN) {
        *why = "the request's URI is too long (query strings up to 4096 bytes)";
        return 414;
    }
    if (info->bad_escape) {
        *why = "malformed percent escape in the URI ('%' must be followed by two hex digits)";
        return 400;
    }
    if (info->control) {
        *why = "a control byte (such as %00) in the URI: no page of the dashboard has one";
        return 400;
    }
    int n_arguments = 0;
    MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, count_argument, &n_arguments);
    if (n_arguments > MAX_ARGUMENTS) {
        *why = "too many query parameters";
        return 400;
    }
    if (!host_ok(connection, h->port)) {
        *why = "the Host header does not name this server (open http://127.0.0.1:PORT/)";
        return 400;
    }
    return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    (void)version;
    (void)upload_data;
    sb_serve_http *h = cls;
    const request_info *info = *req_cls;
    sb_serve_reply r = {.status = 500, .type = "application/json", .fd = -1};
    if (info == NULL) {
        sb_serve_reply_error(&r, 500, "out of memory");
        return send_reply(connection, &r, NULL);
    }
    /* a body (there should be none) is dropped unread */
    *upload_data_size = 0;
    const char *why = NULL;
    unsigned status = check_request(h, connection, method, info, &why);
    if (status != 0) {
        sb_serve_reply_error(&r, status, why);
        return send_reply(connection, &r, status == 405 ? "GET, HEAD" : NULL);
    }
    route(h->serve, connection, url, &r);
    return send_reply(connection, &r, NULL);
}

/* MAX_CONNECTIONS, or fewer where the process may open fewer files (each connection is one;
 * a few are kept for the database and the figures). */
static unsigned connection_limit(void)
{
    struct rlimit rl;
    unsigned limit = MAX_CONNECTIONS;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)MAX_CONNECTIONS + 64)
        limit = rl.rlim_cur > 96 ? (unsigned)rl.rlim_cur - 64 : 32;
    return limit;
}

sb_status sb_serve_http_start(sb_serve *s, int port, sb_serve_http **out, int *bound, sb_error *err)
{
    *out = NULL;
    sb_serve_http *h = calloc(1, sizeof *h);
    if (h == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    h->serve = s;
    h->port = port;
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* never another interface */
    /* one option and its value per line */
    /* clang-format off */
    h->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO, (uint16_t)port, NULL, NULL, on_request, h,
        MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)&addr,
        MHD_OPTION_CONNECTION_LIMIT, connection_limit(),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)CONNECTION_TIMEOUT,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
        MHD_OPTION_END);
    /* clang-format on */
    if (h->daemon == NULL) {
        free(h);
        return sb_error_set(err, SB_ERR_IO,
                            "cannot listen on 127.0.0.1:%d (is the port in use? "
                            "--port 0 takes any free port)",
                            port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    if (info != NULL)
        h->port = info->port;
    *bound = h->port;
    *out = h;
    return SB_OK;
}

void sb_serve_http_stop(sb_serve_http *h)
{
    if (h == NULL)
        return;
    MHD_stop_daemon(h->daemon);
    free(h);
}
