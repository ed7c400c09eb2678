package org.handlekit;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

/** 8 Java threads on one handle; a handle closed under calls; swaps under calls. */
class ThreadsSwapTest {
    static final int THREADS = 8;

    /** Each thread: y = 2x + y and dot(x, y) on buffers of its own, every result checked. */
    static void work(Handle h, int id, int rounds) {
        Blas1 b = h.blas1();
        int n = 64 + id;
        ByteBuffer x = TestEnv.floats(new float[n]), y = TestEnv.floats(new float[n]);
        for (int r = 0; r < rounds; r++) {
            float want = 0;
            for (int i = 0; i < n; i++) {
                x.putFloat(4 * i, (i + id + r) % 5);
                y.putFloat(4 * i, 1);
                want += ((i + id + r) % 5) * (2f * ((i + id + r) % 5) + 1);
            }
            b.saxpy(n, 2f, x, 1, y, 1);
            assertEquals(want, b.sdot(n, x, 1, y, 1), "thread " + id + " round " + r);
        }
    }

    /** Waits until cond holds, failing after 60 s (the threads it waits for may have died). */
    static void waitFor(java.util.function.BooleanSupplier cond, String what) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline)
                throw new AssertionError("waited 60 s for " + what);
            Thread.onSpinWait();
        }
    }

    static List<Throwable> run(int threads, java.util.function.IntConsumer body)
            throws InterruptedException {
        ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int id = t;
            Thread th = new Thread(() -> {
                try {
                    body.accept(id);
                } catch (Throwable e) {
                    errors.add(e);
                }
            });
            ts.add(th);
            th.start();
        }
        for (Thread th : ts)
            th.join(TimeUnit.MINUTES.toMillis(2));
        for (Thread th : ts)
            assertFalse(th.isAlive(), "a thread did not end within 2 minutes");
        return new ArrayList<>(errors);
    }

    @Test
    void eightThreadsOnOneHandle() throws Exception {
        try (Loader loader = TestEnv.loader(); Handle h = loader.select("hk-cpu").handle()) {
            List<Throwable> errors = run(THREADS, id -> work(h, id, 300));
            assertTrue(errors.isEmpty(), errors.toString());
        }
    }

    @Test
    void closeUnderCallsWaitsAndLaterCallsFail() throws Exception {
        try (Loader loader = TestEnv.loader()) {
            Handle h = loader.select("hk-cpu").handle();
            AtomicLong ok = new AtomicLong(), refused = new AtomicLong();
            CountDownLatch started = new CountDownLatch(THREADS);
            List<Throwable> errors = new ArrayList<>();
            ConcurrentLinkedQueue<Throwable> closerErrors = new ConcurrentLinkedQueue<>();
            Thread closer = new Thread(() -> {
                try {
                    started.await();
                    waitFor(() -> ok.get() >= 1000, "1000 calls"); // calls run on every thread
                } catch (Throwable e) {
                    closerErrors.add(e);
                } finally {
                    h.close();
                }
            });
            closer.start();
            errors.addAll(run(THREADS, id -> {
                ByteBuffer x = TestEnv.floats(1, 2, 3, 4);
                started.countDown();
                for (;;) {
                    try {
                        h.blas1().sscal(4, 1f, x, 1);
                        ok.incrementAndGet();
                    } catch (HandlekitException e) {
                        assertEquals("INVALID_HANDLE", e.statusName());
                        refused.incrementAndGet();
                        return;
                    }
                }
            }));
            closer.join();
            assertTrue(errors.isEmpty(), errors.toString());
            assertTrue(closerErrors.isEmpty(), closerErrors.toString());
            assertEquals(THREADS, refused.get());
            assertTrue(h.isClosed());
        }
    }

    @Test
    void swapBetweenTwoBuildsUnderCalls() throws Exception {
        Path dir = TestEnv.dirWith(TestEnv.pluginDir().resolve("hk-cpu.so"),
                                   Paths.get(TestEnv.need("HK_TEST_SWAP_PLUGINS"),
                                             "hk-cpu-1.0.1.so"));
        try (Loader loader = new Loader(new Loader.Options().defaultDir(dir.toString())
                                        .ignoreEnv(true)).scan()) {
            try (MovableHandle m = loader.movableHandle("hk-cpu@1.0.0")) {
                assertEquals("1.0.0", m.plugin().version());
                assertTrue(m.blas1().isDirect(), "the loader's forwarders by direct mapping");
                AtomicBoolean stop = new AtomicBoolean();
                AtomicLong calls = new AtomicLong();
                Thread[] swapper = new Thread[1];
                List<Throwable> swapErrors = new ArrayList<>();
                swapper[0] = new Thread(() -> {
                    try {
                        for (int k = 0; k < 20; k++) {
                            long seen = calls.get();
                            waitFor(() -> calls.get() >= seen + 50, "calls between swaps");
                            String to = k % 2 == 0 ? "hk-cpu@1.0.1" : "hk-cpu@1.0.0";
                            assertEquals(to.substring(7), loader.swap(to).version());
                        }
                    } catch (Throwable e) {
                        swapErrors.add(e);
                    } finally {
                        stop.set(true);
                    }
                });
                swapper[0].start();
                List<Throwable> errors = run(THREADS, id -> {
                    while (!stop.get()) {
                        work(m, id, 1);
                        calls.incrementAndGet();
                    }
                });
                swapper[0].join();
                assertTrue(swapErrors.isEmpty(), swapErrors.toString());
                assertTrue(errors.isEmpty(), errors.toString());
                assertEquals(20, m.generation());
                assertEquals("1.0.0", m.plugin().version());
                Loader.SwapState s = loader.swapState();
                assertEquals("idle", s.phase());
                assertEquals(1, s.handles());
                assertEquals(0, s.draining());
                java.util.Map<String, Long> stats = loader.swapStats();
                assertEquals(20, stats.get("swaps"));
                assertEquals(0, stats.get("refused"));
                assertEquals(19, stats.size());
                assertEquals("BUSY", assertThrows(HandlekitException.class, loader::close)
                        .statusName());
            }
        } finally {
            TestEnv.remove(dir);
        }
    }

    @Test
    void refusedSwapLeavesTheOldBuildServing() throws Exception {
        Path dir = TestEnv.dirWith(TestEnv.pluginDir().resolve("hk-cpu.so"),
                                   Paths.get(TestEnv.need("HK_TEST_SWAP_PLUGINS"),
                                             "swp_wrong.so"));
        try (Loader loader = new Loader(new Loader.Options().defaultDir(dir.toString())
                                        .ignoreEnv(true)).scan();
             MovableHandle m = loader.movableHandle(dir.resolve("hk-cpu.so").toString())) {
            Plugin wrong = loader.plugins().stream().filter(p -> p.path().endsWith("swp_wrong.so"))
                    .findFirst().orElseThrow();
            HandlekitException e = assertThrows(HandlekitException.class,
                                                () -> loader.swap(wrong.path()));
            assertFalse(e.reason().isEmpty());
            assertEquals(dir.resolve("hk-cpu.so").toString(), m.plugin().path());
            work(m, 0, 3);
            assertEquals(1, loader.swapStats().get("refused"));
        } finally {
            TestEnv.remove(dir);
        }
    }
}
