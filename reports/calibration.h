/*
 * calibration.h - renders an abgate.calibration/1 document (evaluator/pipeline/calibrate.h): the markdown of
 * `abgate calibrate --markdown`, and the one-sentence citation that an evaluation's method line
 * carries ("Calibration #3 (30 A/A runs of main): FPR 0/30, ≤ 9.5%; 90% power to REJECT a slowdown of
 * 2.4% (decode 512) to 3.1% (prefill 2k)"). Renders only; every figure comes from the document.
 */
#ifndef AB_CALIBRATION_H
#define AB_CALIBRATION_H

#include <stddef.h>
#include <jansson.h>

/* The citation sentence into buf (always NUL-terminated; "" for a document it cannot read). */
void ab_calibration_cite(char *buf, size_t size, const json_t *calibration);

/* The markdown report. *out is the caller's to free(). AB_EINVALID for a non-object. */
int ab_calibration_markdown(char **out, const json_t *calibration);

#endif
