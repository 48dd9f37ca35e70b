/*
 * install_prog.c — a program built against an installed trainprof (install_test.sh): once
 * with pkg-config's flags, once by a CMake project through find_package(trainprof). It
 * records STEPS steps (tprof_step_begin/end), each holding one range "install-work", into a
 * rank file in DIR (tprof_init), or, without DIR, where the environment says (TRAINPROF_DIR,
 * as under `trainprof run`), and prints the library's version.
 * Usage: install_prog STEPS [DIR]
 */
#include <stdio.h>
#include <stdlib.h>
#include <trainprof.h>

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: install_prog STEPS [DIR]\n");
        return 2;
    }
    int steps = atoi(argv[1]);
    if (argc == 3) {
        tprof_config cfg;
        tprof_config_init(&cfg);
        cfg.output_dir = argv[2];
        int rc = tprof_init(&cfg);
        if (rc != TPROF_OK) {
            fprintf(stderr, "install_prog: tprof_init: %s\n", tprof_strerror(rc));
            return 1;
        }
    }
    for (int i = 0; i < steps; i++) {
        tprof_step_begin((uint64_t)i);
        tprof_range_push("install-work");
        tprof_counter("install.step", i);
        tprof_range_pop();
        tprof_step_end((uint64_t)i);
    }
    int rc = tprof_shutdown();
    printf("install_prog: trainprof %s, %d steps\n", tprof_version(), steps);
    return rc == TPROF_OK ? 0 : 1;
}
