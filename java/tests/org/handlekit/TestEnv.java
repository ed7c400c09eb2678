package org.handlekit;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Comparator;
import java.util.stream.Stream;

/** What the tests get from java/tests/SConscript's environment. */
final class TestEnv {
    private TestEnv() {
    }

    static String need(String var) {
        String v = System.getenv(var);
        assumeTrue(v != null && !v.isEmpty(), var + " is not set for this run");
        return v;
    }

    static Path pluginDir() {
        return Paths.get(need("HK_TEST_PLUGIN_DIR"));
    }

    /** A loader over the build's plugin directory alone. */
    static Loader loader() {
        return new Loader(new Loader.Options().defaultDir(pluginDir().toString())
                          .ignoreEnv(true)).scan();
    }

    /**
     * A new directory of mode 0755 below HK_TEST_TMP (the loader refuses
     * plugins in directories others may write) holding copies of files.
     */
    static Path dirWith(Path... files) throws IOException {
        Path root = Paths.get(need("HK_TEST_TMP"));
        Files.createDirectories(root);
        Path dir = Files.createTempDirectory(root, "jt");
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        for (Path f : files)
            Files.copy(f, dir.resolve(f.getFileName()), StandardCopyOption.REPLACE_EXISTING);
        return dir;
    }

    static void remove(Path dir) throws IOException {
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    static ByteBuffer floats(float... v) {
        ByteBuffer b = ByteBuffer.allocateDirect(4 * v.length).order(ByteOrder.nativeOrder());
        for (int i = 0; i < v.length; i++)
            b.putFloat(4 * i, v[i]);
        return b;
    }

    static ByteBuffer doubles(double... v) {
        ByteBuffer b = ByteBuffer.allocateDirect(8 * v.length).order(ByteOrder.nativeOrder());
        for (int i = 0; i < v.length; i++)
            b.putDouble(8 * i, v[i]);
        return b;
    }

    static float[] readFloats(ByteBuffer b, int n) {
        float[] out = new float[n];
        for (int i = 0; i < n; i++)
            out[i] = b.getFloat(4 * i);
        return out;
    }
}
