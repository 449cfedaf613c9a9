static napi_value undefined(napi_env env) {
    napi_value u;
    napi_get_undefined(env, &u);
    return u;
}

static napi_value throw_type_error(napi_env env, const char *message) {
    napi_throw_type_error(env, "softchat_argument", message);
    return NULL;
}

/* Throws an Error whose `code` is the stable Softchat error code; frees the error. */
static napi_value throw_softchat_error(napi_env env, softchat_error *error) {
    napi_value code, message, err;
    napi_create_string_utf8(env, error->code, NAPI_AUTO_LENGTH, &code);
    napi_create_string_utf8(env, error->message, NAPI_AUTO_LENGTH, &message);
    softchat_error_free(error);
    napi_create_error(env, code, message, &err);
    napi_throw(env, err);
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


/* Runs on the JS thread for each update the library's delivery thread queued: calls the JS
 * function with the update's JSON, or with null for the final call. */
static void callback_call_js(napi_env env, napi_value js_callback, void *context, void *data) {
    (void)context;
    if (env == NULL) {
        free(data);
        return;
    }
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

/* What the library's callback context points at: the thread-safe function, and whether Node
 * said it is closing (the environment is being torn down). Only the library's delivery thread,
 * one call at a time, reads or writes it after creation; the final call frees it. */
typedef struct callback_context {
    napi_threadsafe_function fn;
    int closing;
} callback_context;

/* The C callback the library calls (on its delivery thread): queues a copy of the JSON for the
 * JS thread without blocking (the queue is unbounded); the final call (NULL) lets the JS
 * function go once everything queued before it has run. Once Node reports the function
 * closing, nothing more is queued. */
static void callback_trampoline(void *context, const char *json) {
    callback_context *c = (callback_context *)context;
    if (json == NULL) {
        if (!c->closing && napi_call_threadsafe_function(c->fn, NULL, napi_tsfn_nonblocking) == napi_ok) {
            napi_release_threadsafe_function(c->fn, napi_tsfn_release);
        }
        free(c);
        return;
    }
    if (c->closing) return;
    char *copy = strdup(json);
    if (copy == NULL) return;
    if (napi_call_threadsafe_function(c->fn, copy, napi_tsfn_nonblocking) != napi_ok) {
        free(copy);
        c->closing = 1;
    }
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
    napi_value resource_name;
    napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &resource_name);
    if (napi_create_threadsafe_function(env, value, NULL, resource_name, 0, 1, NULL, NULL, NULL, callback_call_js, &c->fn) != napi_ok) {
        free(c);
        return 0;
    }
    *out = c;
    return 1;
}

/* A callback of a call that failed: nothing will call it, so its JS function is let go. */
static void release_callback(callback_context *c) {
    if (c == NULL) return;
    napi_release_threadsafe_function(c->fn, napi_tsfn_release);
    free(c);
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
