/*
 * spec.c - the speculative-decoding exactness gate (see spec.h): a head whose speculative tokens
 * differ from its own plain greedy tokens is rejected; a base that does so makes the gate infra.
 */
#include "spec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void side_text(char *buf, size_t size, const char *side, const struct ab_spec_exact *e)
{
	if (e->first_diff < 0)
		snprintf(buf, size, "%s %d/%d identical", side, e->identical, e->compared);
	else
		snprintf(buf, size, "%s %d/%d identical, first divergence at token %d (ctx %d, pair %d)", side,
			e->identical, e->compared, e->first_diff, e->diff_ctx, e->diff_pair);
}

void ab_spec_exact_gate(struct ab_gate_result *out, const char *model, const struct ab_spec_exact *base,
	const struct ab_spec_exact *head)
{
	char b[120], h[120];
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", AB_SPEC_EXACT_GATE);
	snprintf(out->model, sizeof(out->model), "%s", model ? model : "");
	snprintf(out->op, sizeof(out->op), "==");
	snprintf(out->label, sizeof(out->label), "%s", AB_SPEC_MISMATCH_LABEL);
	out->threshold = 0.0;
	out->value = head->compared > 0 ? (double)(head->compared - head->identical) : NAN;
	side_text(b, sizeof(b), "base", base);
	side_text(h, sizeof(h), "head", head);
	if (base->compared == 0 && head->compared == 0) {
		out->error = 1;
		snprintf(out->detail, sizeof(out->detail), "no speculative answer could be compared with a plain one");
	} else if (base->identical < base->compared) {
		out->error = 1;
		snprintf(out->detail, sizeof(out->detail), "the base build's speculative decoding is not exact "
			"(%.80s; %.80s), so this gate cannot judge the PR", b, h);
	} else if (head->compared == 0) {
		out->error = 1;
		snprintf(out->detail, sizeof(out->detail), "no speculative answer of the head could be compared (%.120s)", b);
	} else {
		out->pass = head->identical == head->compared;
		snprintf(out->detail, sizeof(out->detail), "speculative tokens equal plain greedy: %.100s; %.100s", h, b);
	}
}
