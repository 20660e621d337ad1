/*
 * fuzz_serve.c - libFuzzer target for the dashboard server's request handling
 * (`selectivbench serve`: src/cli/serve_http.c on libmicrohttpd, serve_data.c,
 * serve_figures.c). At the first input it records two runs of a tiny task with their curves
 * (sb_results_record_external: one finished, one interrupted) in a database of this process
 * in /tmp, renders the figures once, and starts the server in this process on a free port
 * of 127.0.0.1 (sb_serve_http_start); an atexit handler stops it and removes the database
 * and the figures. Each input is one connection: its request is sent, the writing side is
 * shut, and the reply is read until the server closes, or for raw bytes until their first
 * response is whole, or until nothing came for IDLE_MS (a request cut short is left
 * waiting by libmicrohttpd until its 10 s timeout, whatever the client shut).
 *
 * The first byte chooses the request: odd, the rest of the input as it is (any method,
 * headers, pipelined requests, garbage), then an empty line so that most requests cut
 * short still end; even, the rest up to the first CR, LF or space is the target of a
 * well-formed "GET TARGET HTTP/1.1" with this server's Host and "Connection: close", so
 * that paths and query strings are explored past the Host check.
 *
 * Checked: a reply, when there is one, starts with "HTTP/1.x NNN"; a reply whose
 * Content-Type is application/json has a body that jansson parses (for a well-formed GET
 * the body is exactly Content-Length bytes); a target with a control byte, sent or
 * percent-encoded (%00-%1F, %7F), never gets a 200, nor one whose path (before '?') holds
 * "/../" or "%2e%2e" (any case), in the part of the target before a raw NUL byte (the part
 * the server is given); after every input the server still answers
 * GET /api/status with 200 and the two runs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "cli/serve.h"
#include "fuzz_common.h"
#include "selectivbench/selectivbench.h"

#define REPLY_MAX (16u << 20) /* bytes of a reply read (the page and a figure are far less) */
#define TIMEOUT_S 5           /* seconds GET /api/status may take */
#define IDLE_MS 250           /* milliseconds without a byte that end a fuzzed reply */
#define N_RUNS 2              /* runs in the database */

/* LeakSanitizer's suppressions, those of tests/lsan.supp that apply here (`./run.sh fuzz`
 * passes no LSAN_OPTIONS): cairo's text in the figures loads fontconfig's configuration
 * once and keeps it until the process ends. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libfontconfig.so\n";
}

/* ---- the server, made at the first input ---- */

static struct {
    int ready;
    char dir[256], db[300];
    sb_serve serve;
    sb_serve_http *http;
    int port;
} server;

/* Removes the database folder: the database with its companions, the run locks, itself. */
static void remove_database(void)
{
    fuzz_temp_dir_remove(server.dir, server.db);
}

static void stop_server(void)
{
    sb_serve_http_stop(server.http);
    server.http = NULL;
    sb_serve_figures_cleanup(&server.serve.figures);
    remove_database();
}

/* Records a run of the external model `model` on a tiny task, with a curve of n points. */
static void record_run(const char *model, sb_run_status status, const sb_curve_point *curve,
                       size_t n, double test_acc)
{
    static const char *const keys[][2] = {
        {"vocab", "9"},
        {"amb", "8"},
        {"grammar_scale", "True"},
        {"train_seqlen_max", "12"},
        {"test_seqlen_max", "12"},
        {"dataset_size", "200"},
        {"test_size", "50"},
    };
    sb_config *cfg = NULL;
    sb_error err = {0};
    fuzz_check(sb_config_create(&cfg, &err) == SB_OK, "sb_config_create failed");
    fuzz_check(sb_config_set_key(cfg, "model", model, &err) == SB_OK, "the model does not set");
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        fuzz_check(sb_config_set_key(cfg, keys[i][0], keys[i][1], &err) == SB_OK,
                   "the task does not set");
    sb_external_run run = {.status = status,
                           .reason = NULL,
                           .params = 1234,
                           .state_size = 16,
                           .test_acc = test_acc,
                           .test_loss = 0.9,
                           .train_acc = 0.5,
                           .train_loss = 1.0,
                           .wall_s = 2.5,
                           .tokens_per_s = 1000.0,
                           .curve = curve,
                           .n_curve = n,
                           .code_version = "fuzz_serve"};
    if (status != SB_RUN_FINISHED)
        run.reason = "stopped by SIGTERM";
    fuzz_check(sb_results_record_external(server.db, cfg, &run, NULL, &err) == SB_OK,
               "a run of the database cannot be recorded");
    sb_config_free(cfg);
}

static void start_server(void)
{
    /* step, samples, split, loss, acc, lr, tokens/s, wall s */
    static const sb_curve_point curve[4] = {
        {10, 320, SB_SPLIT_TEST, 1.2, 0.4, 1e-3, 900.0, 1.0},
        {10, 320, SB_SPLIT_TRAIN, 1.1, 0.45, 1e-3, 900.0, 1.0},
        {20, 640, SB_SPLIT_TEST, 0.9, 0.6, 5e-4, 1000.0, 2.0},
        {20, -1, SB_SPLIT_TRAIN, 0.8, 0.65, 5e-4, (double)NAN, 2.0},
    };
    /* a reply to a connection closed early must not stop the process (sendfile) */
    signal(SIGPIPE, SIG_IGN);
    fuzz_temp_path("serve", ".d", server.dir, sizeof server.dir);
    snprintf(server.db, sizeof server.db, "%s/results.db", server.dir);
    remove_database();
    record_run("torch_lstm", SB_RUN_FINISHED, curve, 4, 0.6);
    record_run("torch_gru", SB_RUN_INTERRUPTED, curve, 3, (double)NAN);
    atexit(stop_server);

    sb_error err = {0};
    server.serve.db_path = server.db;
    fuzz_check(sb_serve_figures_init(&server.serve.figures, &err) == SB_OK,
               "the figures' folder cannot be made");
    /* rendered once here: the runs never change, so no request renders them again */
    sb_serve_reply r = {.status = 500, .type = "application/json", .fd = -1};
    sb_serve_figures_list(&server.serve, &r);
    free(r.body);
    fuzz_check(sb_serve_http_start(&server.serve, 0, &server.http, &server.port, &err) == SB_OK,
               "the server does not start");
    server.ready = 1;
}

/* ---- one exchange ---- */

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Whether reply[0..len) holds a whole first response: its head, and its body when the
 * request was a GET (Content-Length bytes; a 1xx, 204 or 304 has none). Without a
 * Content-Length the body ends when the server closes. */
static int response_complete(const char *reply, size_t len, int get)
{
    const char *end = len >= 4 ? memmem(reply, len, "\r\n\r\n", 4) : NULL;
    if (end == NULL)
        return 0;
    if (!get || (len > 9 && (reply[9] == '1' || strncmp(reply + 9, "204", 3) == 0 ||
                             strncmp(reply + 9, "304", 3) == 0)))
        return 1;
    size_t head = (size_t)(end + 4 - reply);
    for (const char *p = reply; p < end; p++) {
        if (*p != '\n' || strncasecmp(p + 1, "Content-Length:", 15) != 0)
            continue;
        unsigned long long n = strtoull(p + 16, NULL, 10);
        return len - head >= n;
    }
    return 0;
}

/* Connects fd to addr. libFuzzer's -timeout timer sends SIGALRM every second; a connect()
 * it interrupts (EINTR) goes on in the kernel and cannot be restarted, so its end is
 * awaited with poll and read from SO_ERROR. Returns 1 when connected (errno set when not). */
static int connect_server(int fd, const struct sockaddr_in *addr)
{
    if (connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0)
        return 1;
    if (errno != EINTR)
        return 0;
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    for (int waited_ms = 0; waited_ms < TIMEOUT_S * 1000; waited_ms += 100) {
        int ready = poll(&pfd, 1, 100);
        if (ready < 0 && errno != EINTR)
            return 0;
        if (ready > 0) {
            int so_error = 0;
            socklen_t n = sizeof so_error;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &n) != 0)
                return 0;
            errno = so_error;
            return so_error == 0;
        }
    }
    errno = ETIMEDOUT;
    return 0;
}

/* Sends request over a new connection and reads the reply into *reply (malloc'd, NUL after
 * its *len bytes): until the server closes (*closed = 1), or, with stop_whole, until the
 * first response is whole (get: the request is a GET, its response has a body), or until
 * nothing came for wait_ms (libmicrohttpd waits for the rest of a request cut short rather
 * than close when the client shuts its side; only its 10 s timeout closes it). */
static void exchange(const uint8_t *request, size_t size, int get, int stop_whole, int wait_ms,
                     char **reply, size_t *len, int *closed)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    fuzz_check(fd >= 0, "no socket");
    struct timeval tv = {.tv_sec = TIMEOUT_S, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)server.port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!connect_server(fd, &addr)) {
        fprintf(stderr, "fuzz_serve: connect: %s\n", strerror(errno));
        fuzz_check(0, "the server does not accept a connection");
    }
    /* the server may answer and close before it read everything: a failed send is fine */
    for (size_t sent = 0; sent < size;) {
        ssize_t n = send(fd, request + sent, size - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        sent += (size_t)n;
    }
    shutdown(fd, SHUT_WR);
    size_t cap = 65536, got = 0;
    char *buf = malloc(cap + 1);
    fuzz_check(buf != NULL, "out of memory");
    *closed = 0;
    while (got < REPLY_MAX) {
        if (got == cap) {
            cap *= 2;
            char *grown = realloc(buf, cap + 1);
            fuzz_check(grown != NULL, "out of memory");
            buf = grown;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int ready = poll(&pfd, 1, wait_ms);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            break; /* nothing more came */
        ssize_t n = recv(fd, buf + got, cap - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            *closed = n == 0; /* the server closed (< 0: it reset the connection) */
            break;
        }
        got += (size_t)n;
        buf[got] = '\0'; /* response_complete reads the head as a string */
        if (stop_whole && response_complete(buf, got, get))
            break;
    }
    /* closed with a reset: no TIME_WAIT left behind by thousands of connections */
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    buf[got] = '\0';
    *reply = buf;
    *len = got;
}

/* ---- the reply ---- */

typedef struct reply_info {
    int status;       /* the status code, -1 when the reply is too short to say */
    const char *body; /* after the header block, NULL when the head did not all arrive */
    size_t body_len;  /* bytes after the header block */
    long long length; /* Content-Length, -1 when absent */
    int json;         /* Content-Type: application/json */
} reply_info;

/* The value of header name in the header block [head, end), or NULL; *n its length. */
static const char *header(const char *head, const char *end, const char *name, size_t *n)
{
    size_t name_len = strlen(name);
    const char *line = memchr(head, '\n', (size_t)(end - head)); /* past the status line */
    while (line != NULL && line + 1 < end) {
        line++;
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (eol == NULL)
            eol = end;
        if ((size_t)(eol - line) > name_len && strncasecmp(line, name, name_len) == 0 &&
            line[name_len] == ':') {
            const char *v = line + name_len + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = eol;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' '))
                ve--;
            *n = (size_t)(ve - v);
            return v;
        }
        line = eol < end ? eol : NULL;
    }
    return NULL;
}

/* Checks the status line of reply and reads its head into *info. */
static void parse_reply(const char *reply, size_t len, reply_info *info)
{
    memset(info, 0, sizeof *info);
    info->status = -1;
    info->length = -1;
    static const char prefix[] = "HTTP/1.";
    size_t check = len < sizeof prefix - 1 ? len : sizeof prefix - 1;
    fuzz_check(memcmp(reply, prefix, check) == 0, "a reply does not start with \"HTTP/1.\"");
    if (len < 13)
        return;
    fuzz_check(is_digit(reply[7]) && reply[8] == ' ' && is_digit(reply[9]) && is_digit(reply[10]) &&
                   is_digit(reply[11]) && (reply[12] == ' ' || reply[12] == '\r'),
               "a reply's status line is not \"HTTP/1.x NNN\"");
    info->status = (reply[9] - '0') * 100 + (reply[10] - '0') * 10 + (reply[11] - '0');
    const char *end = memmem(reply, len, "\r\n\r\n", 4);
    if (end == NULL)
        return;
    size_t n = 0;
    const char *type = header(reply, end + 2, "Content-Type", &n);
    info->json = type != NULL && n >= 16 && strncasecmp(type, "application/json", 16) == 0;
    const char *length = header(reply, end + 2, "Content-Length", &n);
    if (length != NULL) {
        char digits[32];
        snprintf(digits, sizeof digits, "%.*s", (int)(n < 31 ? n : 31), length);
        info->length = strtoll(digits, NULL, 10);
    }
    info->body = end + 4;
    info->body_len = len - (size_t)(info->body - reply);
}

/* A JSON body parses (its first Content-Length bytes when given). Returns the value. */
static json_t *check_json(const reply_info *info)
{
    size_t n = info->body_len;
    if (info->length >= 0 && (unsigned long long)info->length <= n)
        n = (size_t)info->length;
    json_error_t jerr;
    json_t *v = json_loadb(info->body, n, 0, &jerr);
    if (v == NULL)
        fprintf(stderr, "fuzz_serve: %s (line %d, column %d) in: %.*s\n", jerr.text, jerr.line,
                jerr.column, (int)(n < 400 ? n : 400), info->body);
    fuzz_check(v != NULL, "a JSON reply's body does not parse");
    return v;
}

/* ---- the request target ---- */

static int hex_digit(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int hex_value(int c)
{
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* Whether target[0..n) has a control byte, sent or percent-encoded. */
static int has_control(const uint8_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int c = t[i];
        if (c == '%' && i + 2 < n && hex_digit(t[i + 1]) && hex_digit(t[i + 2]))
            c = hex_value(t[i + 1]) * 16 + hex_value(t[i + 2]);
        if (c < 0x20 || c == 0x7f)
            return 1;
    }
    return 0;
}

/* Whether s[0..n) holds needle (ASCII case ignored). */
static int holds(const uint8_t *s, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (strncasecmp((const char *)s + i, needle, k) == 0)
            return 1;
    return 0;
}

/* Whether the path of target[0..n) (before '?') climbs: "/../" or "%2e%2e". */
static int climbs(const uint8_t *t, size_t n)
{
    const uint8_t *q = memchr(t, '?', n);
    size_t path = q != NULL ? (size_t)(q - t) : n;
    return holds(t, path, "/../") || holds(t, path, "%2e%2e");
}

/* The method and target of the first request line of raw[0..n) (after empty lines). */
static void request_line(const uint8_t *raw, size_t n, const uint8_t **method, size_t *method_len,
                         const uint8_t **target, size_t *target_len)
{
    size_t i = 0;
    while (i < n && (raw[i] == '\r' || raw[i] == '\n'))
        i++;
    size_t start = i;
    while (i < n && raw[i] != ' ' && raw[i] != '\n' && raw[i] != '\r')
        i++;
    *method = raw + start;
    *method_len = i - start;
    *target = raw + i;
    *target_len = 0;
    if (i >= n || raw[i] != ' ')
        return;
    i++;
    start = i;
    while (i < n && raw[i] != ' ' && raw[i] != '\n' && raw[i] != '\r')
        i++;
    *target = raw + start;
    *target_len = i - start;
}

/* ---- the checks ---- */

/* The reply to a request with this target (get: of method GET; exact: a well-formed GET
 * whose whole reply was read, the server closing the connection after it). */
static void check_reply(const char *reply, size_t len, const uint8_t *target, size_t target_len,
                        int get, int exact, reply_info *info)
{
    parse_reply(reply, len, info);
    if (len == 0)
        return;
    /* libmicrohttpd 0.9.75 hands the target over as a C string: a NUL sent as a byte ends it
     * where the server can never see it (nothing in its callbacks tells), so the server
     * answers the target up to that byte, which is one of its fixed pages or a 404
     * (docs/dashboard.md). What it sees is what is checked. */
    const uint8_t *nul = memchr(target, '\0', target_len);
    if (nul != NULL)
        target_len = (size_t)(nul - target);
    if (info->status == 200) {
        fuzz_check(!has_control(target, target_len),
                   "a target with a control byte (sent or %-encoded) got a 200");
        fuzz_check(!climbs(target, target_len), "a path with \"/../\" or \"%2e%2e\" got a 200");
    }
    if (info->body == NULL || !get)
        return;
    if (exact)
        fuzz_check(info->length >= 0 && (unsigned long long)info->length == info->body_len,
                   "a reply's body is not Content-Length bytes");
    if (info->json && info->length >= 0 && (unsigned long long)info->length <= info->body_len)
        json_decref(check_json(info));
}

/* "GET target HTTP/1.1" with this server's Host, into a new buffer of *n bytes. */
static uint8_t *well_formed_get(const uint8_t *target, size_t target_len, size_t *n)
{
    char head[160];
    int tail = snprintf(head, sizeof head,
                        " HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                        "Connection: close\r\n\r\n",
                        server.port);
    uint8_t *req = malloc(4 + target_len + (size_t)tail);
    fuzz_check(req != NULL, "out of memory");
    memcpy(req, "GET ", 4);
    if (target_len > 0)
        memcpy(req + 4, target, target_len);
    memcpy(req + 4 + target_len, head, (size_t)tail);
    *n = 4 + target_len + (size_t)tail;
    return req;
}

/* The server is alive: GET /api/status answers 200 with the runs of the database, and
 * closes the connection (Connection: close), within TIMEOUT_S seconds. */
static void check_alive(void)
{
    static const uint8_t target[] = "/api/status";
    size_t n = 0;
    uint8_t *req = well_formed_get(target, sizeof target - 1, &n);
    char *reply = NULL;
    size_t len = 0;
    int closed = 0;
    exchange(req, n, 1, 0, TIMEOUT_S * 1000, &reply, &len, &closed);
    fuzz_check(closed, "the server did not answer GET /api/status and close in time");
    reply_info info;
    check_reply(reply, len, target, sizeof target - 1, 1, 1, &info);
    fuzz_check(info.status == 200 && info.json && info.body != NULL,
               "the server no longer answers GET /api/status");
    json_t *v = check_json(&info);
    json_t *total = json_object_get(v, "total");
    fuzz_check(json_is_integer(total) && json_integer_value(total) == N_RUNS,
               "GET /api/status does not count the database's runs");
    json_decref(v);
    free(reply);
    free(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!server.ready)
        start_server();
    if (size == 0)
        return 0;
    const uint8_t *rest = data + 1;
    size_t rest_len = size - 1;
    const uint8_t *target = NULL, *method = NULL;
    size_t target_len = 0, method_len = 0, n = 0;
    uint8_t *request = NULL;
    int well_formed = (data[0] & 1) == 0, get = 1;
    if (well_formed) {
        target = rest;
        while (target_len < rest_len && rest[target_len] != '\r' && rest[target_len] != '\n' &&
               rest[target_len] != ' ')
            target_len++;
        request = well_formed_get(target, target_len, &n);
    } else {
        /* the bytes, then an empty line: a request cut short still ends (see exchange) */
        n = rest_len + 4;
        request = malloc(n);
        fuzz_check(request != NULL, "out of memory");
        if (rest_len > 0)
            memcpy(request, rest, rest_len);
        memcpy(request + rest_len, "\r\n\r\n", 4);
        request_line(request, n, &method, &method_len, &target, &target_len);
        get = method_len == 3 && memcmp(method, "GET", 3) == 0;
    }
    char *reply = NULL;
    size_t len = 0;
    int closed = 0;
    /* a well-formed GET is read to the end (the server closes), raw bytes to their first
     * whole response */
    exchange(request, n, get, !well_formed, IDLE_MS, &reply, &len, &closed);
    reply_info info;
    check_reply(reply, len, target, target_len, get, well_formed && closed, &info);
    free(reply);
    free(request);
    check_alive();
    return 0;
}
