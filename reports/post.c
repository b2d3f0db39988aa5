/*
 * post.c - the text of a post (see post.h). With a result document the body is markdown.h's
 * rendering (verdict, table with CIs, gates, environment, footer), which cuts itself to the room it
 * is given; without one (the worker died, the run was canceled) a short notice says what happened.
 * A last cap cuts at a line boundary, so no UTF-8 sequence or table row is split.
 */
#include "post.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "markdown.h"
#include "render.h"
#include "text.h"

#define NOTE_MAX_CHARS 1000
#define TITLE_REASON_MAX_CHARS 200

/* The result's verdict string at `key`, else `fallback`. */
static const char *verdict_str(const struct ab_post *p, const char *key, const char *fallback)
{
	const char *s = ab_render_str(json_object_get(p->result, "verdict"), key);
	return s ? s : fallback;
}

/* The notice shown when there is no result document to render. */
static void notice(struct ab_text *t, const struct ab_post *p)
{
	const char *label = verdict_str(p, "label", p->label), *reason = verdict_str(p, "reason", p->reason);

	ab_text_puts(t, "### abgate: ");
	if (ab_render_label_safe(label))
		ab_text_printf(t, "`%s`", label);
	else
		ab_text_md(t, label, 100);
	if (reason && reason[0]) {
		ab_text_puts(t, " — ");
		ab_text_md(t, reason, NOTE_MAX_CHARS);
	}
	ab_text_printf(t, "\n\n<sub>head `%.12s` of #%d against ", p->head_sha ? p->head_sha : "unknown", p->pr);
	if (ab_render_label_safe(p->base_ref))
		ab_text_printf(t, "`%s`", p->base_ref);
	else
		ab_text_md(t, p->base_ref ? p->base_ref : "base", 200);
	ab_text_puts(t, " · abgate</sub>\n");
}

/* Cuts t to at most max bytes at the last newline that fits, and says so. */
static void cap_text(struct ab_text *t, size_t max)
{
	static const char note[] = "\n\n_… cut to fit GitHub's size limit; the full report is in the result JSON._\n";
	if (t->failed || t->len <= max || max < sizeof(note))
		return;
	size_t keep = max - sizeof(note);
	while (keep > 0 && t->buf[keep] != '\n')
		keep--;
	ab_text_truncate(t, keep);
	ab_text_puts(t, note);
}

int ab_post_body(char **out, const struct ab_post *p, size_t max_bytes)
{
	struct ab_text t = { 0 };
	char *body;
	int rendered = 0;

	if (p->note && p->note[0]) {
		ab_text_md(&t, p->note, NOTE_MAX_CHARS);
		ab_text_puts(&t, "\n\n");
	}
	if (p->run_url && (!strncmp(p->run_url, "https://", 8) || !strncmp(p->run_url, "http://", 7)) &&
	    !strpbrk(p->run_url, " ()<>[]\"'`\r\n")) {
		ab_text_printf(&t, "[Full report with plots](%s)\n\n", p->run_url);
	}
	if (p->infra)
		ab_text_puts(&t, "> This is an infrastructure problem on the evaluation host, not a verdict on the PR. "
			     "A maintainer can comment `/eval rerun` to try again.\n\n");
	if (p->result) {
		char *md = NULL;
		struct ab_markdown_options mo = {
			.max_chars = max_bytes > t.len + 1000 ? max_bytes - t.len - 500 : 2000, .samples = 1
		};
		if (ab_markdown_render(&md, p->result, &mo) == 0) {
			ab_text_puts(&t, md);
			free(md);
			rendered = 1;
		} else {
			/* A result reports/ cannot read: say so rather than post nothing. */
			ab_text_puts(&t, "_The result document could not be rendered: ");
			ab_text_md(&t, ab_error_last(), 300);
			ab_text_puts(&t, "_\n\n");
		}
	}
	if (!rendered)
		notice(&t, p);
	cap_text(&t, max_bytes);
	if (!(body = ab_text_take(&t)))
		return ab_error_set("out of memory");
	*out = body;
	return 0;
}

/* Copies valid UTF-8 `s` into buf, cut to fit without splitting a character. */
static void copy_utf8(char *buf, size_t size, const char *s)
{
	size_t n = strlen(s);

	if (size == 0)
		return;
	if (n >= size) {
		n = size - 1;
		/* While s[n], the first byte left out, continues a character, leave that one out too. */
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	memcpy(buf, s, n);
	buf[n] = '\0';
}

void ab_post_title(char *buf, size_t size, const struct ab_post *p)
{
	struct ab_text t = { 0 };
	const char *label = verdict_str(p, "label", p->label), *reason = verdict_str(p, "reason", p->reason);

	ab_text_plain(&t, label ? label : "", 100);
	if (reason && reason[0]) {
		ab_text_puts(&t, ": ");
		ab_text_plain(&t, reason, TITLE_REASON_MAX_CHARS);
	}
	copy_utf8(buf, size, t.buf && !t.failed ? t.buf : "");
	ab_text_free(&t);
}
