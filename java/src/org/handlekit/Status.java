package org.handlekit;

/** hk_status_t values (plugin_api/hk_status.h) and their names and messages. */
public final class Status {
    public static final int OK = 0;
    public static final int INVALID_VALUE = 1;
    public static final int NULL_POINTER = 2;
    public static final int INVALID_HANDLE = 3;
    public static final int NOT_SUPPORTED = 4;
    public static final int OUT_OF_MEMORY = 5;
    public static final int NO_DRIVER = 6;
    public static final int INVALID_DEVICE = 9;
    public static final int NOT_FOUND = 19;
    public static final int BUSY = 22;

    private Status() {
    }

    /** The status's name as the loader library gives it ("UNKNOWN" outside the list). */
    public static String name(int status) {
        return Lib.hk_status_name(status);
    }

    /** The status's one-line message as the loader library gives it. */
    public static String message(int status) {
        return Lib.hk_status_string(status);
    }
}
