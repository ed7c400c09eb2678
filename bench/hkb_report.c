/* hk-bench: the result table, printed row by row as figures finish, the
 * summary line and the CSV file for the README table and plot. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hkb.h"

static hkb_row_t *rows;
static size_t nrows, caprows;

void hkb_row_set(hkb_row_t *row, const char *id, const char *op, const char *prec, int64_t n,
                 const char *unit, double hk, double ref, hkb_target_kind_t kind, double target)
{
    memset(row, 0, sizeof *row);
    snprintf(row->id, sizeof row->id, "%s", id);
    snprintf(row->op, sizeof row->op, "%s", op);
    snprintf(row->prec, sizeof row->prec, "%s", prec);
    if (n > 0)
        hkb_fmt_n(n, row->n, sizeof row->n);
    else
        snprintf(row->n, sizeof row->n, "-");
    snprintf(row->unit, sizeof row->unit, "%s", unit);
    row->hk = hk;
    row->ref = ref;
    row->ratio = ref != 0.0 ? hk / ref : NAN;
    row->kind = kind;
    row->target = target;
    row->cublas = NAN;
    row->err = NAN;
}

static const char *verdict(const hkb_row_t *r)
{
    switch (r->kind) {
    case HKB_TARGET_RATIO_GE:
        return r->ratio >= r->target ? "ok" : "MISS";
    case HKB_TARGET_RATIO_LE:
        return r->ratio <= r->target ? "ok" : "MISS";
    case HKB_TARGET_VALUE_LE:
        return r->hk <= r->target ? "ok" : "MISS";
    case HKB_TARGET_EXTRA_LE:
        return r->hk - r->ref <= r->target ? "ok" : "MISS";
    default:
        return "info";
    }
}

static void fmt_target(const hkb_row_t *r, char *buf, size_t len)
{
    switch (r->kind) {
    case HKB_TARGET_RATIO_GE:
        snprintf(buf, len, ">=%.2f", r->target);
        break;
    case HKB_TARGET_RATIO_LE:
        snprintf(buf, len, "<=%.2f", r->target);
        break;
    case HKB_TARGET_VALUE_LE:
        snprintf(buf, len, "<=%g%s", r->target, r->unit);
        break;
    case HKB_TARGET_EXTRA_LE:
        snprintf(buf, len, "<=+%g%s", r->target, r->unit);
        break;
    default:
        snprintf(buf, len, "-");
        break;
    }
}

/* Values span ns to GB/s: four significant digits whatever the magnitude. */
static void fmt_val(double v, char *buf, size_t len)
{
    if (isnan(v))
        snprintf(buf, len, "-");
    else if (fabs(v) >= 1e6)
        snprintf(buf, len, "%.4g", v);
    else if (fabs(v) >= 100)
        snprintf(buf, len, "%.1f", v);
    else
        snprintf(buf, len, "%.3f", v);
}

void hkb_report_header(void)
{
    printf("%-3s %-18s %-4s %-5s %-7s %10s %10s %7s %-10s %-4s %7s %8s  %s\n", "id", "op",
           "prec", "n", "unit", "hk", "ref", "ratio", "target", "res", "cublas", "err", "note");
    fflush(stdout);
}

size_t hkb_report_count(void)
{
    return nrows;
}

int hkb_report_add(const hkb_row_t *row)
{
    char hk[24], ref[24], ratio[24], cub[24], tgt[40], err[16];

    if (nrows == caprows) {
        size_t cap = caprows ? caprows * 2 : 64;
        hkb_row_t *r = realloc(rows, cap * sizeof *r);
        if (!r)
            return hkb_fail("out of host memory for result rows");
        rows = r;
        caprows = cap;
    }
    rows[nrows++] = *row;
    fmt_val(row->hk, hk, sizeof hk);
    fmt_val(row->ref, ref, sizeof ref);
    fmt_val(row->cublas, cub, sizeof cub);
    if (isnan(row->ratio))
        snprintf(ratio, sizeof ratio, "-");
    else
        snprintf(ratio, sizeof ratio, "%.3f", row->ratio);
    fmt_target(row, tgt, sizeof tgt);
    if (isnan(row->err))
        snprintf(err, sizeof err, "-");
    else
        snprintf(err, sizeof err, "%.1e", row->err);
    printf("%-3s %-18s %-4s %-5s %-7s %10s %10s %7s %-10s %-4s %7s %8s  %s\n", row->id, row->op,
           row->prec, row->n, row->unit, hk, ref, ratio, tgt, verdict(row), cub, err, row->note);
    fflush(stdout);
    return 0;
}

int hkb_report_summary(void)
{
    size_t ok = 0, miss = 0, info = 0;
    char ids[64] = "";

    for (size_t i = 0; i < nrows; i++) {
        const char *v = verdict(&rows[i]);
        if (strcmp(v, "ok") == 0)
            ok++;
        else if (strcmp(v, "MISS") == 0)
            miss++;
        else
            info++;
        if (!strstr(ids, rows[i].id) && strlen(ids) + strlen(rows[i].id) + 2 < sizeof ids) {
            strcat(ids, ids[0] ? "," : "");
            strcat(ids, rows[i].id);
        }
    }
    printf("summary: %zu rows (%s): %zu ok, %zu MISS, %zu info\n", nrows, ids[0] ? ids : "none",
           ok, miss, info);
    if (miss) {
        printf("missed:");
        for (size_t i = 0; i < nrows; i++)
            if (strcmp(verdict(&rows[i]), "MISS") == 0)
                printf(" %s:%s/%s/%s", rows[i].id, rows[i].op, rows[i].prec, rows[i].n);
        printf("\n");
    }
    fflush(stdout);
    return (int)miss;
}

static void csv_num(FILE *f, double v)
{
    if (isnan(v))
        fputs(",", f);
    else
        fprintf(f, ",%.6g", v);
}

int hkb_report_csv(const char *path)
{
    FILE *f = fopen(path, "w");
    char tgt[40];

    if (!f)
        return hkb_fail("cannot write %s", path);
    fprintf(f, "id,op,prec,n,unit,hk,ref,ratio,target,result,cublas,err,note\n");
    for (size_t i = 0; i < nrows; i++) {
        const hkb_row_t *r = &rows[i];
        fmt_target(r, tgt, sizeof tgt);
        fprintf(f, "%s,%s,%s,%s,%s", r->id, r->op, r->prec, r->n, r->unit);
        csv_num(f, r->hk);
        csv_num(f, r->ref);
        csv_num(f, r->ratio);
        fprintf(f, ",%s,%s", tgt, verdict(r));
        csv_num(f, r->cublas);
        csv_num(f, r->err);
        fprintf(f, ",%s\n", r->note);
    }
    /* A full disk shows up at fclose, not at fprintf. */
    if (ferror(f) | fclose(f))
        return hkb_fail("error writing %s", path);
    return 0;
}

void hkb_report_free(void)
{
    free(rows);
    rows = NULL;
    nrows = caprows = 0;
}
