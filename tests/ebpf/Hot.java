public class Hot {
  static long hot(long i) {
    long x = i;
    for (long k = 0; k < 50; k++) x = x * 31 + (x >>> 7);
    return x;
  }
  static long middle(long n) { long x = 0; for (long i = 0; i < n; i++) x += hot(i ^ x) & 7; return x; }
  static long outer(long end) {
    long t = 0;
    while (System.currentTimeMillis() < end) t += middle(200000);
    return t;
  }
  public static void main(String[] a) {
    long end = System.currentTimeMillis() + 1000L * Long.parseLong(a[0]);
    if (a.length > 1) System.load(a[1]);
    if (a.length > 1) new Thread(() -> slowLoop(end)).start();
    if (a.length > 1) new Thread(() -> jniLoop(end)).start();
    System.out.println(outer(end));
  }
  static long slow(long n) {
    long x = n;
    for (int k = 0; k < 1000; k++) x = x * 31 + (x >>> 7);
    return x;
  }
  static long slowLoop(long end) {
    long t = 0;
    while (System.currentTimeMillis() < end) t += slow(t);
    return t;
  }
  static native long spin(long n);
  static long jniLoop(long end) {
    long t = 0;
    while (System.currentTimeMillis() < end) t += spin(100000);
    return t;
  }
}
// Hot.java — the JVM workload of the Java tests and bench/java_sample_cost.sh (nothing may be
// added above the class: the tests check its line numbers). `java Hot SECONDS` runs main ->
// outer -> middle -> hot for SECONDS: hot, a short loop on a long (a safepoint poll in it),
// called by middle 200,000 times a round, which C2 inlines into middle after warm-up.
// `java Hot SECONDS LIB` also loads LIB (hot_spin.c, built as a shared object) and runs two
// more threads: slowLoop -> slow (kept in the interpreter by -XX:CompileCommand=exclude,
// Hot.slowLoop) and jniLoop -> spin, a native method of LIB.
