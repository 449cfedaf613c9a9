static napi_value undefined(napi_env env) {
    napi_value u;
    napi_get_undefined(env, &u);
    return u;
}

static napi_value throw_type_error(napi_env env, const char *message) {
    napi_throw_type_error(env, "softchat_argument", message);
    return NULL;
}

/* An Error whose `code` is the stable Softchat error code; frees the error. */
static napi_value softchat_error_value(napi_env env, softchat_error *error) {
    napi_value code, message, err;
    napi_create_string_utf8(env, error->code, NAPI_AUTO_LENGTH, &code);
    napi_create_string_utf8(env, error->message, NAPI_AUTO_LENGTH, &message);
    softchat_error_free(error);
    napi_create_error(env, code, message, &err);
    return err;
}

/* Throws softchat_error_value(error). */
static napi_value throw_softchat_error(napi_env env, softchat_error *error) {
    napi_throw(env, softchat_error_value(env, error));
    return NULL;
}

/* Zeroes and frees a text argument: a secret key may have passed through it. */
static void free_text(char *text) {
    if (text == NULL) return;
    explicit_bzero(text, strlen(text));
    free(text);
}

/* A JS string as a malloc'd UTF-8 C string; null and undefined become NULL. */
static int get_text(napi_env env, napi_value value, char **out) {
    napi_valuetype type;
    napi_typeof(env, value, &type);
    if (type == napi_null || type == napi_undefined) {
        *out = NULL;
        return 1;
    }
    if (type != napi_string) return 0;
    size_t length = 0;
    napi_get_value_string_utf8(env, value, NULL, 0, &length);
    char *text = malloc(length + 1);
    if (text == NULL) return 0;
    napi_get_value_string_utf8(env, value, text, length + 1, &length);
    *out = text;
    return 1;
}


/* The most updates of one callback queued for the JS thread and not yet run. A listener slower
 * than the relays is absorbed by the library's own bounded queue (FFIUpdateQueue: 4,096; state
 * changes coalesced per relay, activities dropped with a count and then one notice): once this
 * many are queued, the library's delivery thread waits here for the JS thread, so the
 * back-pressure reaches that queue instead of copies piling up in the addon without end (a relay
 * flooding NOTICEs grew the host by 645 MB in 100 s when this queue was unbounded). The I/O
 * thread never waits: it only pushes into the library's queue. */
#define CALLBACK_QUEUE_BOUND 256

/* One lock for every callback context's fields and for callback_waiters (a few threads, short
 * critical sections). callback_room is broadcast when a queue drops below the bound, a context
 * closes, or a call that may wait for a delivery thread begins. */
static pthread_mutex_t callback_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t callback_room = PTHREAD_COND_INITIALIZER;

/* How many calls from JS are inside a library function that may wait for a delivery thread: a
 * call on a handle returned with callbacks (the managed transport: its stop(), close() and free
 * wait until its delivery thread has handed over what is queued and made the final call). While
 * one runs, the JS thread cannot run the queued updates, so a delivery thread waiting for room
 * would never get it: a deadlock. Then delivery threads queue past the bound without waiting.
 * What they add is bounded: a stop hands over at most what the library's own queue holds (no
 * update is queued after it), and the transport's other calls (relays(), dropConnection())
 * return at once. */
static int callback_waiters = 0;

/* Brackets a library call that may wait for a delivery thread (see callback_waiters). */
static void callback_wait_begin(void) {
    pthread_mutex_lock(&callback_lock);
    callback_waiters++;
    pthread_cond_broadcast(&callback_room);
    pthread_mutex_unlock(&callback_lock);
}

static void callback_wait_end(void) {
    pthread_mutex_lock(&callback_lock);
    callback_waiters--;
    pthread_mutex_unlock(&callback_lock);
}

/* What the library's callback context points at: the thread-safe function, how many of its
 * calls are queued and not yet run, and whether it is closing (the final call was made, Node
 * refused a call, or Node finalized the function as the environment was torn down: nothing more
 * is queued). Two references keep it: the library's, until its final call (or until the call
 * that would have taken the callback failed), and the thread-safe function's, until Node
 * finalizes it; the last one frees it. Every field is read and written under callback_lock. */
typedef struct callback_context {
    napi_threadsafe_function fn;
    size_t queued;
    int closing;
    int references;
} callback_context;

/* Drops one of the context's two references; the last frees it. Under callback_lock. */
static void callback_context_release(callback_context *c) {
    if (--c->references == 0) free(c);
}

/* Runs on the JS thread for each update the library's delivery thread queued: calls the JS
 * function with the update's JSON, or with null for the final call, after counting it off the
 * queue (a delivery thread waiting for room may go on). */
static void callback_call_js(napi_env env, napi_value js_callback, void *context, void *data) {
    if (env == NULL) {
        /* The environment is being torn down: Node empties the queue after it finalized the
         * function, when the context may be gone already; nothing is counted any more. */
        free(data);
        return;
    }
    callback_context *c = (callback_context *)context;
    pthread_mutex_lock(&callback_lock);
    if (c->queued-- == CALLBACK_QUEUE_BOUND) pthread_cond_broadcast(&callback_room);
    pthread_mutex_unlock(&callback_lock);
    napi_value argument, receiver;
    if (data != NULL) {
        napi_create_string_utf8(env, (const char *)data, NAPI_AUTO_LENGTH, &argument);
        free(data);
    } else {
        napi_get_null(env, &argument);
    }
    napi_get_undefined(env, &receiver);
    napi_call_function(env, receiver, js_callback, 1, &argument, NULL);
}

/* Node is done with the thread-safe function: after the final call ran, or as the environment
 * is torn down (a worker ends, the process exits) while the library may still call. Nothing is
 * queued on it any more, and a delivery thread waiting for room stops waiting. */
static void callback_finalize(napi_env env, void *data, void *hint) {
    (void)env;
    (void)hint;
    callback_context *c = (callback_context *)data;
    pthread_mutex_lock(&callback_lock);
    c->closing = 1;
    pthread_cond_broadcast(&callback_room);
    callback_context_release(c);
    pthread_mutex_unlock(&callback_lock);
}

/* The C callback the library calls (on its delivery thread, one call at a time): queues a copy
 * of the JSON for the JS thread, first waiting while CALLBACK_QUEUE_BOUND are queued, unless a
 * call from JS may be waiting for a delivery thread (callback_waiters). The final call (NULL)
 * never waits: it lets the JS function go once everything queued before it has run.
 * The bound is kept here, not as the thread-safe function's max_queue_size (0, unbounded):
 * stop() waits on the JS thread for the final call, so that call can neither wait for room nor
 * be refused for the lack of it (napi_queue_full), and N-API's blocking mode cannot be woken when
 * a call from JS begins to wait for this thread. callback_lock is held across each N-API call,
 * so callback_finalize cannot let Node delete the function while one runs. */
static void callback_trampoline(void *context, const char *json) {
    callback_context *c = (callback_context *)context;
    char *copy = NULL;
    if (json != NULL && (copy = strdup(json)) == NULL) return;
    pthread_mutex_lock(&callback_lock);
    if (json == NULL) {
        if (!c->closing && napi_call_threadsafe_function(c->fn, NULL, napi_tsfn_nonblocking) == napi_ok) {
            c->queued++;
            napi_release_threadsafe_function(c->fn, napi_tsfn_release);
        }
        c->closing = 1;
        callback_context_release(c);
        pthread_mutex_unlock(&callback_lock);
        return;
    }
    while (!c->closing && c->queued >= CALLBACK_QUEUE_BOUND && callback_waiters == 0) {
        pthread_cond_wait(&callback_room, &callback_lock);
    }
    if (c->closing) {
        free(copy);
    } else if (napi_call_threadsafe_function(c->fn, copy, napi_tsfn_nonblocking) == napi_ok) {
        c->queued++;
    } else {
        free(copy);
        c->closing = 1;
    }
    pthread_mutex_unlock(&callback_lock);
}

/* A JS function (or null) as a thread-safe function the library's thread can call; it keeps
 * the event loop alive until the final call. */
static int get_callback(napi_env env, napi_value value, const char *name, callback_context **out) {
    napi_valuetype type;
    napi_typeof(env, value, &type);
    *out = NULL;
    if (type == napi_null || type == napi_undefined) return 1;
    if (type != napi_function) return 0;
    callback_context *c = calloc(1, sizeof(callback_context));
    if (c == NULL) return 0;
    c->references = 2;
    napi_value resource_name;
    napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &resource_name);
    if (napi_create_threadsafe_function(env, value, NULL, resource_name, 0, 1, c, callback_finalize, c, callback_call_js, &c->fn) != napi_ok) {
        free(c);
        return 0;
    }
    *out = c;
    return 1;
}

/* A callback of a call that failed: nothing will call it, so its JS function is let go (the
 * library's reference with it; Node's goes when it finalizes the function). */
static void release_callback(callback_context *c) {
    if (c == NULL) return;
    pthread_mutex_lock(&callback_lock);
    napi_release_threadsafe_function(c->fn, napi_tsfn_release);
    c->closing = 1;
    callback_context_release(c);
    pthread_mutex_unlock(&callback_lock);
}

/* A handle of the type `tag` names: an external this addon made and tagged with that
 * type; any other value, an external of another handle type included, is refused. */
static int get_handle(napi_env env, napi_value value, const napi_type_tag *tag, void **out) {
    napi_valuetype type;
    napi_typeof(env, value, &type);
    if (type != napi_external) return 0;
    bool tagged = false;
    if (napi_check_object_type_tag(env, value, tag, &tagged) != napi_ok || !tagged) return 0;
    return napi_get_value_external(env, value, out) == napi_ok;
}

/* A handle that may be absent: null and undefined become NULL. */
static int get_optional_handle(napi_env env, napi_value value, const napi_type_tag *tag, void **out) {
    napi_valuetype type;
    napi_typeof(env, value, &type);
    if (type == napi_null || type == napi_undefined) {
        *out = NULL;
        return 1;
    }
    return get_handle(env, value, tag, out);
}

/* A handle as an external tagged with its handle type; the garbage collector calls the
 * handle's free function. */
static napi_value wrap_handle(napi_env env, void *handle, napi_finalize finalize, const napi_type_tag *tag) {
    napi_value external;
    napi_create_external(env, handle, finalize, NULL, &external);
    napi_type_tag_object(env, external, tag);
    return external;
}

/* A result string as a JS string; frees it. */
static napi_value take_string(napi_env env, char *text) {
    napi_value value;
    if (text == NULL) return undefined(env);
    napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &value);
    softchat_string_free(text);
    return value;
}

static napi_value js_softchat_contract_checksum(napi_env env, napi_callback_info info) {
    (void)info;
    napi_value value;
    napi_create_string_utf8(env, softchat_contract_checksum(), NAPI_AUTO_LENGTH, &value);
    return value;
}

static void export_function(napi_env env, napi_value exports, const char *name, napi_callback callback) {
    napi_value fn;
    napi_create_function(env, name, NAPI_AUTO_LENGTH, callback, NULL, &fn);
    napi_set_named_property(env, exports, name, fn);
}

/* The most arguments a call the schema marks "blocks" takes (the receiver, callbacks and their
 * contexts counted); the generator refuses a schema that needs more. */
#define ASYNC_MAX_ARGS 12

/* One call run off the JS thread as Node-API async work: the `<name>_async` export of each call
 * the schema marks "blocks" (SQLite, or a wait such as a transport's stop). Its arguments are
 * decoded on the JS thread; the call runs on a libuv worker thread, so the event loop keeps
 * running (timers fire, and a stopping transport's last updates are delivered to their
 * listeners); the result or the error settles the Promise back on the JS thread. Every handle
 * argument's external is held by a reference until then, so the garbage collector cannot free a
 * handle the worker is using. Text arguments are zeroed and freed after the call, as the
 * synchronous form does. */
typedef struct async_call {
    napi_async_work work;
    napi_deferred deferred;
    void (*run)(struct async_call *call);      /* the C call, on the worker thread */
    void *args[ASYNC_MAX_ARGS];                 /* the C arguments in order (handles, texts, callback contexts) */
    napi_ref refs[ASYNC_MAX_ARGS];              /* the handle arguments' externals */
    size_t ref_count;
    char *texts[ASYNC_MAX_ARGS];                /* the text arguments, zeroed and freed when settled */
    size_t text_count;
    callback_context *callbacks[ASYNC_MAX_ARGS]; /* released if the call fails (nothing will call them) */
    size_t callback_count;
    softchat_error *error;
    void *result;                               /* char * (JSON) or a handle */
    napi_finalize finalize;                     /* a handle result's free, else NULL */
    const napi_type_tag *tag;                   /* a handle result's tag */
    int returns_json;
} async_call;

/* A zeroed async_call for `run`; NULL when out of memory. */
static async_call *async_call_new(void (*run)(async_call *)) {
    async_call *c = calloc(1, sizeof(async_call));
    if (c != NULL) c->run = run;
    return c;
}

/* Frees what the call holds on every way out: texts, references, and (when it failed or never
 * ran) its callbacks; then the call itself. On the JS thread. */
static void async_call_free(napi_env env, async_call *c, int release_callbacks) {
    for (size_t i = 0; i < c->text_count; i++) free_text(c->texts[i]);
    for (size_t i = 0; i < c->ref_count; i++) napi_delete_reference(env, c->refs[i]);
    if (release_callbacks) {
        for (size_t i = 0; i < c->callback_count; i++) release_callback(c->callbacks[i]);
    }
    free(c);
}

/* Holds a handle argument: keeps `value` (its external) alive and records the handle. */
static int async_hold(napi_env env, async_call *c, size_t index, napi_value value, void *handle) {
    c->args[index] = handle;
    if (handle == NULL) return 1;
    return napi_create_reference(env, value, 1, &c->refs[c->ref_count++]) == napi_ok;
}

static void async_execute(napi_env env, void *data) {
    (void)env;
    async_call *c = (async_call *)data;
    c->run(c);
}

static void async_complete(napi_env env, napi_status status, void *data) {
    async_call *c = (async_call *)data;
    napi_deferred deferred = c->deferred;
    napi_delete_async_work(env, c->work);
    if (c->error != NULL) {
        softchat_error *error = c->error;
        async_call_free(env, c, 1);
        napi_reject_deferred(env, deferred, softchat_error_value(env, error));
        return;
    }
    if (status != napi_ok) {
        async_call_free(env, c, 1);
        napi_value message, err;
        napi_create_string_utf8(env, "softchat: the call was not run", NAPI_AUTO_LENGTH, &message);
        napi_create_error(env, NULL, message, &err);
        napi_reject_deferred(env, deferred, err);
        return;
    }
    napi_value value;
    if (c->finalize != NULL) {
        value = wrap_handle(env, c->result, c->finalize, c->tag);
    } else if (c->returns_json) {
        value = take_string(env, (char *)c->result);
    } else {
        value = undefined(env);
    }
    async_call_free(env, c, 0);
    napi_resolve_deferred(env, deferred, value);
}

/* Queues the call and returns its Promise; on failure frees it and throws. */
static napi_value async_start(napi_env env, async_call *c, const char *name) {
    napi_value promise, resource;
    if (napi_create_promise(env, &c->deferred, &promise) != napi_ok) {
        async_call_free(env, c, 1);
        return throw_type_error(env, "softchat: cannot create a promise");
    }
    napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &resource);
    if (napi_create_async_work(env, NULL, resource, async_execute, async_complete, c, &c->work) != napi_ok
        || napi_queue_async_work(env, c->work) != napi_ok) {
        napi_deferred deferred = c->deferred;
        async_call_free(env, c, 1);
        napi_value message, err;
        napi_create_string_utf8(env, "softchat: cannot queue the call", NAPI_AUTO_LENGTH, &message);
        napi_create_error(env, NULL, message, &err);
        napi_reject_deferred(env, deferred, err);
    }
    return promise;
}
