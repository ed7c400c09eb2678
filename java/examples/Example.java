// A complete handlekit host in Java: it loads the installed plugins, picks
// one, makes a handle, runs saxpy and sdot of hk.blas1/1 on direct buffers,
// checks the results, and closes what it made.
// usage: java -cp handlekit.jar:jna.jar:. Example [REQUEST]   (default hk-cpu@^1)
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.handlekit.Blas1;
import org.handlekit.Handle;
import org.handlekit.HandlekitException;
import org.handlekit.Loader;
import org.handlekit.Plugin;

public class Example {
    public static void main(String[] args) {
        String request = args.length > 0 ? args[0] : "hk-cpu@^1";
        final int n = 1000;
        try (Loader loader = new Loader().scan()) {
            Plugin plugin = loader.select(request);
            System.out.println("plugin: " + plugin.name() + " " + plugin.version());
            try (Handle h = plugin.handle()) {
                ByteBuffer x = ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder());
                ByteBuffer y = ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder());
                float want = 0;
                for (int i = 0; i < n; i++) {
                    x.putFloat(4 * i, i % 7);
                    y.putFloat(4 * i, 1);
                    want += (i % 7) * (2f * (i % 7) + 1);
                }
                Blas1 blas = h.blas1();
                blas.saxpy(n, 2f, x, 1, y, 1); // y = 2x + y
                float dot = blas.sdot(n, x, 1, y, 1);
                int wrong = 0;
                for (int i = 0; i < n; i++)
                    wrong += y.getFloat(4 * i) != 2f * (i % 7) + 1 ? 1 : 0;
                System.out.println("saxpy: " + wrong + " of " + n + " wrong");
                System.out.println("sdot: " + dot + ", expected " + want);
                if (wrong != 0 || dot != want)
                    System.exit(1);
            }
        } catch (HandlekitException e) {
            System.err.println("Example: " + e.getMessage()); // status name and reason
            System.exit(1);
        }
        System.out.println("all results right");
    }
}
