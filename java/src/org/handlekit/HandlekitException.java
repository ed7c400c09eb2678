package org.handlekit;

/**
 * A handlekit call failed. {@link #status()} is the hk_status_t value,
 * {@link #statusName()} its name ("INVALID_VALUE"), {@link #reason()} the
 * one-line reason the plugin or the loader left (its last-error text), or the
 * binding's own reason for input it refused before any native call.
 */
public class HandlekitException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final int status;
    private final String reason;

    public HandlekitException(int status, String reason) {
        super(Status.name(status) + " (" + status + "): "
              + (reason == null || reason.isEmpty() ? Status.message(status) : reason));
        this.status = status;
        this.reason = reason == null ? "" : reason;
    }

    /** The hk_status_t value. */
    public int status() {
        return status;
    }

    /** The status's name without prefix, e.g. "NULL_POINTER"; "UNKNOWN" outside the list. */
    public String statusName() {
        return Status.name(status);
    }

    /** The last-error line of the failed call ("" when none was left). */
    public String reason() {
        return reason;
    }
}
