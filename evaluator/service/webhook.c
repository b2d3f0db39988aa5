/*
 * webhook.c - libmicrohttpd front of the service. Each POST /webhook is collected into a buffer
 * capped at max_body (a larger Content-Length is refused before the body is read; a chunked body
 * that grows past the cap is drained, not kept), its signature checked with OpenSSL's HMAC and
 * CRYPTO_memcmp, and only then given to the event callback.
 */
#define _GNU_SOURCE
#include "webhook.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "error.h"
#include "log.h"

struct ab_webhook {
	struct MHD_Daemon *daemon;
	struct ab_webhook_options opts;
	char *secret;
	int port;
};

/* Per-request state, from the first call of the access handler to the completion callback. */
struct request {
	int is_webhook;
	int too_large;
	char *body;
	size_t len, cap;
	struct timespec start;
};

int ab_webhook_verify(const char *secret, const void *body, size_t len, const char *header)
{
	unsigned char want[EVP_MAX_MD_SIZE], got[32];
	unsigned int want_len = 0;

	if (!header)
		return ab_error_setc(AB_EINVALID, "webhook: no X-Hub-Signature-256");
	if (strncmp(header, "sha256=", 7) || strlen(header + 7) != 64)
		return ab_error_setc(AB_EINVALID, "webhook: malformed X-Hub-Signature-256");
	for (int i = 0; i < 32; i++) {
		unsigned v;
		char hex[3] = { header[7 + 2 * i], header[8 + 2 * i], 0 };
		if (!strchr("0123456789abcdefABCDEF", hex[0]) || !strchr("0123456789abcdefABCDEF", hex[1]) ||
		    sscanf(hex, "%2x", &v) != 1)
			return ab_error_setc(AB_EINVALID, "webhook: malformed X-Hub-Signature-256");
		got[i] = (unsigned char)v;
	}
	if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), body, len, want, &want_len) || want_len != 32)
		return ab_error_set("webhook: HMAC failed");
	if (CRYPTO_memcmp(want, got, 32) != 0)
		return ab_error_setc(AB_EINVALID, "webhook: signature does not match");
	return 0;
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, const char *content_type,
			       const char *text)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", content_type);
	enum MHD_Result ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result respond_json(struct MHD_Connection *conn, unsigned status, const char *json)
{
	return respond(conn, status, "application/json", json);
}

/* Decodes application/x-www-form-urlencoded "payload=..." in place. 0, or -1 when absent. */
static int form_payload(char *body, size_t *len)
{
	char *p = NULL;
	if (!strncmp(body, "payload=", 8))
		p = body + 8;
	else if ((p = strstr(body, "&payload=")))
		p += 9;
	if (!p)
		return -1;
	size_t o = 0;
	for (; *p && *p != '&'; p++) {
		if (*p == '+') {
			body[o++] = ' ';
		} else if (*p == '%' && p[1] && p[2]) {
			unsigned v;
			char hex[3] = { p[1], p[2], 0 };
			if (sscanf(hex, "%2x", &v) != 1)
				return -1;
			body[o++] = (char)v;
			p += 2;
		} else {
			body[o++] = *p;
		}
	}
	body[o] = '\0';
	*len = o;
	return 0;
}

static enum MHD_Result handle_webhook(ab_webhook *w, struct MHD_Connection *conn, struct request *r)
{
	char reply[512];
	const char *sig = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Hub-Signature-256");
	const char *event = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-GitHub-Event");
	const char *delivery = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-GitHub-Delivery");
	const char *ctype = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
	const char *body = r->body ? r->body : "";

	if (ab_webhook_verify(w->secret, body, r->len, sig) < 0) {
		AB_WARN("webhook: delivery %s (%s) rejected: %s", delivery ? delivery : "-", event ? event : "-",
			ab_error_last());
		return respond_json(conn, MHD_HTTP_UNAUTHORIZED, "{\"error\":\"bad or missing X-Hub-Signature-256\"}");
	}
	if (!event || !event[0])
		return respond_json(conn, MHD_HTTP_BAD_REQUEST, "{\"error\":\"missing X-GitHub-Event\"}");
	if (delivery && (strlen(delivery) > 128 || strpbrk(delivery, "\"\\\r\n")))
		return respond_json(conn, MHD_HTTP_BAD_REQUEST, "{\"error\":\"malformed X-GitHub-Delivery\"}");
	if (ctype && !strncasecmp(ctype, "application/x-www-form-urlencoded", 33) && r->body &&
	    form_payload(r->body, &r->len) < 0)
		return respond_json(conn, MHD_HTTP_BAD_REQUEST, "{\"error\":\"form body without payload=\"}");
	snprintf(reply, sizeof(reply), "{}");
	int status = w->opts.on_event(w->opts.payload, event, delivery, r->body ? r->body : "", r->len, reply,
				      sizeof(reply));
	return respond_json(conn, (unsigned)status, reply);
}

static const char *query_arg(void *request, const char *name)
{
	return MHD_lookup_connection_value(request, MHD_GET_ARGUMENT_KIND, name);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	ab_webhook *w = cls;
	struct request *r = *con_cls;

	if (!r) {
		if (!(r = calloc(1, sizeof(*r))))
			return MHD_NO;
		*con_cls = r;
		clock_gettime(CLOCK_MONOTONIC, &r->start);
		if (!strcmp(url, "/webhook") && !strcmp(method, "POST")) {
			r->is_webhook = 1;
			const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
			if (cl && strtoull(cl, NULL, 10) > w->opts.max_body) {
				/* Refuse before reading: MHD answers instead of "100 Continue" and closes. */
				r->too_large = 1;
				return respond_json(conn, MHD_HTTP_CONTENT_TOO_LARGE, "{\"error\":\"body too large\"}");
			}
		}
		return MHD_YES;
	}
	if (*upload_data_size) {
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		if (!r->is_webhook || r->too_large)
			return MHD_YES;  /* drained, not kept */
		if (r->len + n > w->opts.max_body) {
			r->too_large = 1;
			free(r->body);
			r->body = NULL;
			r->len = r->cap = 0;
			return MHD_YES;
		}
		if (r->len + n + 1 > r->cap) {
			size_t cap = r->cap ? r->cap : 16384;
			while (cap < r->len + n + 1)
				cap *= 2;
			if (cap > w->opts.max_body + 1)
				cap = w->opts.max_body + 1;
			char *nb = realloc(r->body, cap);
			if (!nb)
				return MHD_NO;
			r->body = nb;
			r->cap = cap;
		}
		memcpy(r->body + r->len, upload_data, n);
		r->len += n;
		r->body[r->len] = '\0';
		return MHD_YES;
	}
	if (r->is_webhook) {
		if (r->too_large)
			return respond_json(conn, MHD_HTTP_CONTENT_TOO_LARGE, "{\"error\":\"body too large\"}");
		return handle_webhook(w, conn, r);
	}
	if (!strcmp(url, "/webhook"))
		return respond_json(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "{\"error\":\"POST only\"}");
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return respond_json(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "{\"error\":\"GET only\"}");
	if (!strcmp(url, "/healthz")) {
		char msg[256] = "ok";
		int bad = w->opts.healthy ? w->opts.healthy(w->opts.payload, msg, sizeof(msg)) : 0;
		char text[300];
		snprintf(text, sizeof(text), "%s\n", msg);
		return respond(conn, bad ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK, "text/plain", text);
	}
	if (!strcmp(url, "/metrics") && w->opts.metrics) {
		char *text = w->opts.metrics(w->opts.payload);
		if (!text)
			return respond(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "metrics unavailable\n");
		enum MHD_Result ret = respond(conn, MHD_HTTP_OK, "text/plain; version=0.0.4", text);
		free(text);
		return ret;
	}
	if (w->opts.page) {
		struct ab_webhook_page page = { 0 };
		int status = w->opts.page(w->opts.payload, url, query_arg, conn, &page);
		if (status < 0 || !page.body) {
			free(page.body);
			return respond(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "internal error\n");
		}
		struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(page.body), page.body, MHD_RESPMEM_MUST_FREE);
		if (!resp) {
			free(page.body);
			return MHD_NO;
		}
		MHD_add_response_header(resp, "Content-Type", page.content_type ? page.content_type : "text/plain");
		/* The pages need nothing from anywhere: no script, no fetch, inline styles and SVG only. */
		MHD_add_response_header(resp, "Content-Security-Policy",
					"default-src 'none'; style-src 'unsafe-inline'; img-src data:");
		MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
		enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, resp);
		MHD_destroy_response(resp);
		return ret;
	}
	return respond_json(conn, MHD_HTTP_NOT_FOUND, "{\"error\":\"not found\"}");
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	ab_webhook *w = cls;
	struct request *r = *con_cls;

	if (!r)
		return;
	if (r->is_webhook && w->opts.on_done) {
		struct timespec end;
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS);
		clock_gettime(CLOCK_MONOTONIC, &end);
		w->opts.on_done(w->opts.payload, ci ? (int)ci->http_status : 0,
				(double)(end.tv_sec - r->start.tv_sec) + (double)(end.tv_nsec - r->start.tv_nsec) / 1e9);
	}
	free(r->body);
	free(r);
	*con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	AB_DEBUG("webhook: microhttpd: %s", line);
}

int ab_webhook_start(ab_webhook **out, const struct ab_webhook_options *o)
{
	ab_webhook *w = NULL;
	struct addrinfo hints = { 0 }, *ai = NULL;
	char host[256], port[16];
	const char *colon;
	int rc, error = -1;

	if (!o->secret || !o->secret[0] || !o->on_event)
		return ab_error_setc(AB_EINVALID, "webhook: a secret and an event callback are required");
	/* "host:port" or "[v6]:port" */
	if (o->listen[0] == '[') {
		const char *close = strchr(o->listen, ']');
		if (!close || close[1] != ':')
			return ab_error_setc(AB_EINVALID, "webhook: bad listen address %s", o->listen);
		snprintf(host, sizeof(host), "%.*s", (int)(close - o->listen - 1), o->listen + 1);
		colon = close + 1;
	} else {
		if (!(colon = strrchr(o->listen, ':')))
			return ab_error_setc(AB_EINVALID, "webhook: bad listen address %s (host:port)", o->listen);
		snprintf(host, sizeof(host), "%.*s", (int)(colon - o->listen), o->listen);
	}
	snprintf(port, sizeof(port), "%s", colon + 1);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if ((rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai)) != 0)
		return ab_error_setc(AB_EINVALID, "webhook: listen %s: %s", o->listen, gai_strerror(rc));
	if (!(w = calloc(1, sizeof(*w))) || !(w->secret = strdup(o->secret))) {
		ab_error_set("out of memory");
		goto cleanup;
	}
	w->opts = *o;
	w->opts.secret = w->secret;
	if (!w->opts.max_body)
		w->opts.max_body = 5u << 20;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	w->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, w,
				     MHD_OPTION_SOCK_ADDR, ai->ai_addr,
				     MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(o->threads > 0 ? o->threads : 4),
				     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)15,
				     MHD_OPTION_CONNECTION_LIMIT, (unsigned)256,
				     MHD_OPTION_NOTIFY_COMPLETED, on_completed, w,
				     MHD_OPTION_EXTERNAL_LOGGER, mhd_log, w,
				     MHD_OPTION_END);
	if (!w->daemon) {
		ab_error_set("webhook: cannot listen on %s (address in use?)", o->listen);
		goto cleanup;
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(w->daemon, MHD_DAEMON_INFO_BIND_PORT);
	w->port = di ? (int)di->port : atoi(port);
	*out = w;
	w = NULL;
	error = 0;
cleanup:
	freeaddrinfo(ai);
	ab_webhook_stop(w);
	return error;
}

int ab_webhook_port(const ab_webhook *w) { return w->port; }

void ab_webhook_stop(ab_webhook *w)
{
	if (!w)
		return;
	if (w->daemon)
		MHD_stop_daemon(w->daemon);
	if (w->secret)
		memset(w->secret, 0, strlen(w->secret));
	free(w->secret);
	free(w);
}
