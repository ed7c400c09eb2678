package org.handlekit;

import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.nio.file.Paths;

import org.junit.jupiter.api.Test;

/**
 * On a GPU (HK_TEST_GPU=1, tools/gpu-check.sh; skipped elsewhere): a PTX file
 * loaded, its kernel taken and launched from Java and its result compared
 * with a host reference; every blas1 result of hk-cuda equal to hk-cpu's.
 */
class GpuTest {
    static void needGpu() {
        assumeTrue("1".equals(System.getenv("HK_TEST_GPU")),
                   "HK_TEST_GPU=1 is not set: no GPU for this run");
        assumeTrue(System.getenv("HK_CUDA_DRIVER") == null,
                   "HK_CUDA_DRIVER names a driver (the simulation?): the GPU tests need the real one");
    }

    @Test
    void ptxKernelLaunchedFromJavaMatchesTheHost() throws Exception {
        needGpu();
        Path ptx = Paths.get(TestEnv.need("HK_TEST_KERNELS"), "pykernels.ptx");
        int n = 100_000;
        float[] xs = new float[n], ys = new float[n];
        for (int i = 0; i < n; i++) {
            xs[i] = (i % 13) * 0.25f;
            ys[i] = (i % 7) - 3;
        }
        try (Loader loader = TestEnv.loader(); Handle h = loader.select("hk-cuda").handle()) {
            Memory m = h.memory();
            long x = SimCudaTest.put(m, TestEnv.floats(xs)), y = SimCudaTest.put(m,
                                                                               TestEnv.floats(ys));
            try (Kernels.Library lib = h.kernels().load(ptx)) {
                Kernels.Kernel k = lib.kernel("hkpy_axpy");
                assertNotEquals(0, k.function());
                assertTrue(k.attributes().maxThreadsPerBlock() >= 256);
                k.launch(Kernels.Dim.of(120), Kernels.Dim.of(256), 0, Kernels.Arg.i64(n),
                         Kernels.Arg.f32(1.5f), Kernels.Arg.ptr(x), Kernels.Arg.ptr(y));
                h.synchronize();
                float[] got = SimCudaTest.get(m, y, n);
                for (int i = 0; i < n; i++)
                    assertEquals(ys[i] + 1.5f * xs[i], got[i], "element " + i);
            } finally {
                m.free(x);
                m.free(y);
            }
        }
    }

    @Test
    void blas1OnTheGpuEqualsHkCpu() {
        needGpu();
        int n = 4096;
        float[] xs = new float[n], ys = new float[n];
        for (int i = 0; i < n; i++) {
            xs[i] = (i % 11) - 5;
            ys[i] = (i % 3);
        }
        try (Loader loader = TestEnv.loader(); Handle c = loader.select("hk-cpu").handle();
             Handle g = loader.select("hk-cuda").handle()) {
            ByteBuffer cx = TestEnv.floats(xs), cy = TestEnv.floats(ys);
            Memory m = g.memory();
            long x = SimCudaTest.put(m, TestEnv.floats(xs)), y = SimCudaTest.put(m,
                                                                               TestEnv.floats(ys));
            try {
                c.blas1().saxpy(n, 2f, cx, 1, cy, 1);
                g.blas1().saxpy(n, 2f, x, 1, y, 1);
                assertArrayEquals(TestEnv.readFloats(cy, n), SimCudaTest.get(m, y, n));
                c.blas1().sscal(n, 0.5f, cy, 1);
                g.blas1().sscal(n, 0.5f, y, 1);
                assertArrayEquals(TestEnv.readFloats(cy, n), SimCudaTest.get(m, y, n));
                // small integers and halves: every sum is exact in any order
                assertEquals(c.blas1().sdot(n, cx, 1, cy, 1), g.blas1().sdot(n, x, 1, y, 1));
                c.blas1().scopy(n, cx, 1, cy, 1);
                g.blas1().scopy(n, x, 1, y, 1);
                assertArrayEquals(TestEnv.readFloats(cy, n), SimCudaTest.get(m, y, n));
                assertEquals(c.blas1().snrm2(n, cx, 1), g.blas1().snrm2(n, x, 1),
                             1e-6 * c.blas1().snrm2(n, cx, 1));
            } finally {
                m.free(x);
                m.free(y);
            }
        }
    }
}
