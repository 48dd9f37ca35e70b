/* hta_synth_prog DIR — writes tests/hta_run.h's synthetic two-rank GPU run into DIR, for
 * the hta_export test. */
#include <stdio.h>

#include "hta_run.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: hta_synth_prog DIR\n");
        return 2;
    }
    return hta_write_run(argv[1]) == 0 ? 0 : 1;
}
