/* hot_spin.c — the native method of Hot.java (its JNI thread): Java_Hot_spin calls c_inner,
 * which keeps its own frame (noinline), in a loop. Built by test_java.c as a shared object. */
#include <jni.h>
__attribute__((noinline)) long c_inner(long x) {
  for (int k = 0; k < 100; k++) x = x * 31 + (x >> 7);
  __asm__ volatile("" : "+r"(x));
  return x;
}
JNIEXPORT jlong JNICALL Java_Hot_spin(JNIEnv *env, jclass c, jlong n) {
  long x = 0;
  for (long i = 0; i < n; i++) x += c_inner(i ^ x) & 7;
  return x;
}
