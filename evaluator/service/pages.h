/*
 * pages.h - the read-only pages `abgate serve` answers GET with, from the store in the state dir:
 *   /runs/<id>        the HTML report of a stored evaluation (reports/html.h)
 *   /runs/<id>.json   its abgate.result/1 document
 *   /history?repo=R[&suite=S]   every series of R's base branch over the stored evaluations
 *   /calibration      the latest calibration per suite (none stored yet: a page that says so)
 * Nothing from the config is shown: configured secrets and clone URLs are scrubbed from every body,
 * the suite path is cut to its file name. Unknown paths and ids are a plain 404 page.
 */
#ifndef AB_PAGES_H
#define AB_PAGES_H

#include "config.h"
#include "webhook.h"

/* Answers GET `path` (see above). `cfg` is borrowed (state_dir, repos, secrets to scrub). Returns
 * the HTTP status with out->body set (caller frees), or -1 on an internal error. Thread-safe: each
 * call opens its own store handle. */
int ab_pages_get(const struct ab_config *cfg, const char *path, ab_webhook_arg_fn arg, void *request,
		 struct ab_webhook_page *out);

/* The run page's address: "<public_url>/runs/<id>" into buf, "" when public_url is unset or id <= 0. */
void ab_pages_run_url(char *buf, size_t size, const struct ab_config *cfg, long long id);

#endif
