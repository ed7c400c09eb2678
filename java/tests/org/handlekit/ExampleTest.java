package org.handlekit;

import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/** README.md's "From Java" program is java/examples/Example.java, and it runs right. */
class ExampleTest {
    static final String EXAMPLE = "java/examples/Example.java";

    @Test
    void readmeBlockIsTheExampleFile() throws IOException {
        String readme = Files.readString(Paths.get("README.md"), StandardCharsets.UTF_8);
        int at = readme.indexOf("### From Java");
        assertTrue(at >= 0, "README.md has a section \"From Java\"");
        int open = readme.indexOf("```java\n", at);
        int close = readme.indexOf("```\n", open + 8);
        assertTrue(open > 0 && close > open, "a ```java block in that section");
        String block = readme.substring(open + 8, close);
        assertEquals(Files.readString(Paths.get(EXAMPLE), StandardCharsets.UTF_8), block);
    }

    @Test
    void exampleRunsOnTheInstalledPlugins() throws Exception {
        String java = TestEnv.need("HK_TEST_JAVA"), cp = TestEnv.need("HK_TEST_JAVA_CP");
        Process p = new ProcessBuilder(java, "-cp", cp, "Example").redirectErrorStream(true)
                .start();
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the example ended within 60 s");
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), out);
        List<String> lines = out.lines().toList();
        assertEquals(4, lines.size(), out);
        assertEquals("plugin: hk-cpu 1.0.0", lines.get(0));
        assertEquals("saxpy: 0 of 1000 wrong", lines.get(1));
        assertEquals("sdot: 28951.0, expected 28951.0", lines.get(2));
        assertEquals("all results right", lines.get(3));
    }
}
