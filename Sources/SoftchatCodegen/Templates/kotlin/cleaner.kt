/** Runs a handle's free function once its owner is collected (phantom references, one daemon thread). */
internal object SoftchatCleaner {
    private val queue = java.lang.ref.ReferenceQueue<Any>()
    private val live = java.util.Collections.newSetFromMap(java.util.concurrent.ConcurrentHashMap<Ref, Boolean>())

    private class Ref(owner: Any, val action: Runnable) : java.lang.ref.PhantomReference<Any>(owner, queue)

    init {
        val thread = Thread({
            while (true) {
                val ref = queue.remove() as Ref
                live.remove(ref)
                try { ref.action.run() } catch (t: Throwable) { t.printStackTrace() }
            }
        }, "softchat-cleaner")
        thread.isDaemon = true
        thread.start()
    }

    fun register(owner: Any, action: Runnable) {
        live.add(Ref(owner, action))
    }
}

/**
 * The executor the `…Async` forms use by default. Every call the schema marks as blocking (the
 * account's SQLite reads and writes, a transport's start, stop and close) blocks the thread it is
 * made on, so an Android app must not make it on the main thread: the `…Async` form runs it here
 * and completes a [java.util.concurrent.CompletableFuture] with its result, or exceptionally with
 * its [SoftchatException].
 *
 * Why futures and not coroutines: a JNA call blocks a thread whichever API wraps it, and a
 * CompletableFuture needs no library (the facade depends on JNA and kotlin-stdlib alone), works
 * from Java, and becomes a suspending call with kotlinx-coroutines-jdk8's `await()` in an app that
 * has coroutines. Four daemon threads: the account serializes its writes, so more threads would
 * only wait; pass your own executor (Dispatchers.IO.asExecutor(), say) to any `…Async` form.
 */
object SoftchatExecutors {
    private val count = java.util.concurrent.atomic.AtomicInteger()

    /** Four daemon threads named `softchat-blocking-N`. */
    val blocking: java.util.concurrent.ExecutorService = java.util.concurrent.Executors.newFixedThreadPool(4) { task ->
        Thread(task, "softchat-blocking-${count.incrementAndGet()}").apply { isDaemon = true }
    }
}
