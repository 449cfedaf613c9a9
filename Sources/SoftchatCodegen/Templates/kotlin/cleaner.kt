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
