import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

import org.handlekit.Blas1;
import org.handlekit.Handle;
import org.handlekit.Loader;
import org.handlekit.Plugin;

/**
 * P13: the per-call cost of Java over C for hk.blas1/1 sscal at n = 2^12 on
 * one plugin (hk-cpu), measured side by side in one process: rounds of calls
 * through the binding (JNA direct mapping) alternate with rounds of the same
 * calls made from C (hkp13.c, its own handle on the same plugin file), on the
 * same buffer. Prints each median, their ratio and the difference per call.
 *
 * usage: P13 PLUGIN.so [ROUNDS [CALLS]]   (the library hkp13 is found through
 *        the system property handlekit.p13.library)
 */
public final class P13 {
    static native int hkp13_open(String path);
    static native double hkp13_sscal_ns(Pointer x, long n, float alpha, long iters);
    static native int hkp13_close();

    public static void main(String[] args) {
        if (args.length < 1) {
            System.err.println("usage: P13 PLUGIN.so [ROUNDS [CALLS]]");
            System.exit(2);
        }
        Loader.version(); // the loader library first: libhkp13 uses the same one
        Native.register(P13.class, NativeLibrary.getInstance(System.getProperty(
                "handlekit.p13.library")));
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 21;
        int calls = args.length > 2 ? Integer.parseInt(args[2]) : 20000;
        final int n = 1 << 12;
        ByteBuffer x = ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder());
        for (int i = 0; i < n; i++)
            x.putFloat(4 * i, 1.0f);
        Pointer xp = Native.getDirectBufferPointer(x);
        int st = hkp13_open(args[0]);
        if (st != 0) {
            System.err.println("P13: the C baseline could not open " + args[0] + ": status " + st);
            System.exit(1);
        }
        try (Loader loader = new Loader(new Loader.Options().ignoreEnv(true))) {
            Plugin plugin = loader.open(args[0]);
            try (Handle h = plugin.handle()) {
                Blas1 b = h.blas1();
                double[] c = new double[rounds], j = new double[rounds];
                for (int w = 0; w < 3; w++) { // warm-up: JIT, caches
                    hkp13_sscal_ns(xp, n, 1.0f, calls);
                    javaRound(b, x, n, calls);
                }
                for (int r = 0; r < rounds; r++) {
                    if (r % 2 == 0) {
                        c[r] = hkp13_sscal_ns(xp, n, 1.0f, calls);
                        j[r] = javaRound(b, x, n, calls);
                    } else {
                        j[r] = javaRound(b, x, n, calls);
                        c[r] = hkp13_sscal_ns(xp, n, 1.0f, calls);
                    }
                }
                double cm = median(c), jm = median(j);
                System.out.printf("P13 sscal n=%d on %s %s, %d rounds of %d calls:%n", n,
                                  plugin.name(), plugin.version(), rounds, calls);
                System.out.printf("P13   C %.1f ns/call, Java (JNA direct mapping) %.1f ns/call%n",
                                  cm, jm);
                System.out.printf("P13   ratio %.3f, Java over C %+.1f ns per call%n", jm / cm,
                                  jm - cm);
            }
        } finally {
            hkp13_close();
        }
    }

    private static double javaRound(Blas1 b, ByteBuffer x, int n, int calls) {
        long t0 = System.nanoTime();
        for (int i = 0; i < calls; i++)
            b.sscal(n, 1.0f, x, 1);
        return (System.nanoTime() - t0) / (double) calls;
    }

    private static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s[s.length / 2];
    }
}
