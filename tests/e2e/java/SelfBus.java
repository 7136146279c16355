// SPDX-License-Identifier: MIT
//
// java.bats: sends itself SIGBUS (kill -BUS), which the JVM reports as a
// fatal error: it must not be swallowed, nor loop between two handlers.
public class SelfBus {
    public static void main(String[] args) throws Exception {
        long pid = ProcessHandle.current().pid();
        System.out.println("sending SIGBUS");
        System.out.flush();
        Process p = new ProcessBuilder("kill", "-BUS", Long.toString(pid)).start();
        p.waitFor();
        // The JVM dies of it before this: no timing is asserted, only that
        // "still alive" never comes.
        Thread.sleep(2000);
        System.out.println("still alive");
    }
}
