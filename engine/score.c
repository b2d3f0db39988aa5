/*
 * score.c - teacher-forced prompt scoring (score.h): chunked forward calls with every row's
 * logits, a log-sum-exp in double per row, and the top-k by a bounded heap (ties: lower id first,
 * so equal logits always rank the same way on every API).
 */
#include "score.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

int ember_scorer_init(struct ember_scorer *sc, const struct ember_session *ss)
{
	const size_t n_vocab = (size_t)ss->model->hp.n_vocab;
	memset(sc, 0, sizeof(*sc));
	sc->logits = malloc(EMBER_SCORE_CHUNK * n_vocab * sizeof(float));
	sc->heap = malloc(n_vocab * sizeof(int32_t));
	if (!sc->logits || !sc->heap) {
		ember_scorer_clear(sc);
		return ember_error_set(EMBER_ENOMEM, "out of memory for the score buffers (%zu floats)",
		                       EMBER_SCORE_CHUNK * n_vocab);
	}
	sc->n_vocab = (int)n_vocab;
	return 0;
}

void ember_scorer_clear(struct ember_scorer *sc)
{
	free(sc->logits);
	free(sc->heap);
	memset(sc, 0, sizeof(*sc));
}

/* Heap order: "a ranks below b" = lower logit, or equal logit and higher id. */
static int ranks_below(const float *l, int32_t a, int32_t b) { return l[a] < l[b] || (l[a] == l[b] && a > b); }

static void sift_down(int32_t *h, int n, int i, const float *l)
{
	for (;;) {
		int c = 2 * i + 1;
		if (c >= n)
			return;
		if (c + 1 < n && ranks_below(l, h[c + 1], h[c]))
			c++;
		if (!ranks_below(l, h[c], h[i]))
			return;
		int32_t t = h[i];
		h[i] = h[c];
		h[c] = t;
		i = c;
	}
}

/* The k best ids of l[0..n) into h[0..k), best first (ties: lower id first). */
static void top_k(int32_t *h, const float *l, int n, int k)
{
	if (k <= 0)
		return;
	for (int i = 0; i < k; i++)
		h[i] = i;
	for (int i = k / 2 - 1; i >= 0; i--)
		sift_down(h, k, i, l);
	for (int i = k; i < n; i++)
		if (ranks_below(l, h[0], i)) {
			h[0] = i;
			sift_down(h, k, 0, l);
		}
	for (int end = k - 1; end > 0; end--) { /* heap sort: worst to the back, so best ends first */
		int32_t t = h[0];
		h[0] = h[end];
		h[end] = t;
		sift_down(h, end, 0, l);
	}
}

int ember_score_prompt(struct ember_scorer *sc, struct ember_session *ss, const int32_t *prompt, int n, int first,
                       int k, ember_score_fn fn, void *user)
{
	const int n_vocab = sc->n_vocab;
	if (!sc->logits || n < 1 || n > ss->n_ctx || first < 0 || first >= n || k < 0 || k > n_vocab)
		return ember_error_set(EMBER_EFORMAT, "score: bad request (%d tokens, first %d, top_k %d, context %d)", n,
		                       first, k, ss->n_ctx);
	for (int c0 = 0; c0 < n; c0 += EMBER_SCORE_CHUNK) {
		const int c1 = n - c0 < EMBER_SCORE_CHUNK ? n : c0 + EMBER_SCORE_CHUNK;
		const int need_rows = c1 > first;
		if (ss->ops->forward(ss->be, prompt + c0, c1 - c0, c0, need_rows, need_rows ? sc->logits : NULL, NULL))
			return ember_error_wrap(EMBER_ERROR, "forward failed while scoring");
		for (int p = c0 > first ? c0 : first; p < c1; p++) {
			const float *l = sc->logits + (size_t)(p - c0) * n_vocab;
			double max = -INFINITY, sum = 0.0;
			for (int i = 0; i < n_vocab; i++)
				if (l[i] > max)
					max = l[i];
			for (int i = 0; i < n_vocab; i++)
				sum += exp((double)l[i] - max);
			top_k(sc->heap, l, n_vocab, k);
			const struct ember_score_position sp = {p, l, max + log(sum), sc->heap, k};
			int rc = fn(user, &sp);
			if (rc)
				return rc;
		}
	}
	return 0;
}
