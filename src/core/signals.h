/*
 * signals.h — what the session (session.c, flusher.c) and the signal code (signals.c) ask
 * of each other. signals.c owns every signal disposition trainprof touches; flusher.c owns
 * the flusher and, through core/writer.c, the rank file. Internal to libtrainprof.
 */
#ifndef TPROF_SIGNALS_H
#define TPROF_SIGNALS_H

/* Longest a signal that ends the process waits for the flusher to finish the file (ms): the
 * interrupted thread may hold a lock the flusher needs, and the process must die anyway. */
#define TPROF__SIGNAL_FLUSH_MS 3000

/* ---- session.c, flusher.c -> signals.c */

/* Puts trainprof's handler in front of every signal whose default action ends the process
 * and that the process has not ignored (TRAINPROF_NO_SIGNALS=1: none). Called once the
 * flusher runs, by the thread that starts the session; again in a forked child that starts
 * its own session (dispositions inherited from the parent are kept as they are). */
void tprof__signals_install(void);

/* 1 for a signal the hardware raises for the instruction that faulted (or abort()'s): the
 * interrupted thread may be anywhere, even inside a driver holding its locks. */
int tprof__signal_synchronous(int sig);

/* ---- signals.c -> flusher.c; each async-signal-safe (no lock, no allocation) */

/* The job's own handler runs for SIGTERM/SIGINT: ask the flusher to make what is written
 * durable (it does not wait). */
void tprof__session_signal_notify(int sig);

/* `sig` ends the process once this returns: the flusher writes what is recorded and the
 * end record with `sig` as its reason. Waits at most wait_ms for it; 1 when the end record
 * is written, 0 when there is no session or the time ran out. A second caller (another
 * thread's fatal signal) only waits for the first one's end record. */
int tprof__session_signal_final(int sig, int wait_ms);

/* On the flusher thread itself (a fault there): appends the end record with `sig` as its
 * reason straight to the rank file, as the flusher cannot be asked; what is still in the
 * rings is lost. */
void tprof__session_signal_emergency(int sig);

/* 1 on the flusher thread. */
int tprof__session_on_flusher(void);

#endif /* TPROF_SIGNALS_H */
