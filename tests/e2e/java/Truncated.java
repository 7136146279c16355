// SPDX-License-Identifier: MIT
//
// java.bats: a NullPointerException from a null field access (the JVM's
// SIGSEGV handler turns it into one), then a MappedByteBuffer over a file
// truncated underneath it (the JVM's SIGBUS handler turns the fault into an
// InternalError; under nosigbus --policy=files the pages read as zeros),
// then a NullPointerException again.
import java.io.*;
import java.nio.*;
import java.nio.channels.*;
import java.nio.file.*;

public class Truncated {
    static class Box { int v; }
    static int field(Box b) { return b.v; }

    public static void main(String[] args) throws Exception {
        Box nobody = null;
        try {
            System.out.println("field " + field(nobody));
        } catch (NullPointerException e) {
            System.out.println("NullPointerException");
        }
        Path p = Paths.get(args[0]);
        int size = 2 * 65536;	// two pages or more, whatever the page size
        Files.write(p, new byte[size]);
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            MappedByteBuffer b = ch.map(FileChannel.MapMode.READ_ONLY, 0, size);
            System.out.println("mapped " + b.capacity());
            ch.truncate(0);
            System.out.println("truncated");
            long sum = 0;
            try {
                for (int i = 0; i < size; i++)
                    sum += b.get(i);
                System.out.println("read " + size + " bytes, sum " + sum);
            } catch (InternalError e) {
                System.out.println("InternalError: " + e.getMessage());
            }
        }
        try {
            System.out.println("field " + field(nobody));
        } catch (NullPointerException e) {
            System.out.println("NullPointerException");
        }
    }
}
