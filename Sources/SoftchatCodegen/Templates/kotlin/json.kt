internal object SoftchatJson {
    fun parse(text: String): Any? {
        val r = Reader(text)
        r.skip()
        val v = r.value()
        r.skip()
        if (r.i != text.length) throw IllegalArgumentException("softchat: trailing data in JSON at ${r.i}")
        return v
    }

    fun write(value: Any?): String = StringBuilder().also { write(value, it) }.toString()

    private fun write(value: Any?, out: StringBuilder) {
        when (value) {
            null -> out.append("null")
            is Boolean -> out.append(if (value) "true" else "false")
            is Long, is Int -> out.append(value.toString())
            is Double -> out.append(value.toString())
            is String -> {
                out.append('"')
                for (ch in value) {
                    when {
                        ch == '"' -> out.append("\\\"")
                        ch == '\\' -> out.append("\\\\")
                        ch == '\n' -> out.append("\\n")
                        ch == '\r' -> out.append("\\r")
                        ch == '\t' -> out.append("\\t")
                        ch < ' ' -> out.append(String.format("\\u%04x", ch.toInt()))
                        else -> out.append(ch)
                    }
                }
                out.append('"')
            }
            is Map<*, *> -> {
                out.append('{')
                var first = true
                for ((k, v) in value) {
                    if (!first) out.append(',')
                    first = false
                    write(k as String, out)
                    out.append(':')
                    write(v, out)
                }
                out.append('}')
            }
            is List<*> -> {
                out.append('[')
                value.forEachIndexed { i, v ->
                    if (i > 0) out.append(',')
                    write(v, out)
                }
                out.append(']')
            }
            else -> throw IllegalArgumentException("softchat: cannot encode ${value.javaClass} as JSON")
        }
    }

    private class Reader(val s: String) {
        var i = 0

        fun skip() {
            while (i < s.length && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) i++
        }

        fun fail(what: String): Nothing = throw IllegalArgumentException("softchat: bad JSON at $i: $what")

        fun value(): Any? {
            if (i >= s.length) fail("unexpected end")
            return when (s[i]) {
                '{' -> obj()
                '[' -> arr()
                '"' -> str()
                't' -> lit("true", true)
                'f' -> lit("false", false)
                'n' -> lit("null", null)
                else -> num()
            }
        }

        fun lit(word: String, v: Any?): Any? {
            if (!s.startsWith(word, i)) fail("expected $word")
            i += word.length
            return v
        }

        fun num(): Any {
            val start = i
            while (i < s.length && (s[i].isDigit() || s[i] == '-' || s[i] == '+' || s[i] == '.' || s[i] == 'e' || s[i] == 'E')) i++
            val t = s.substring(start, i)
            if (t.isEmpty()) fail("unexpected character")
            return t.toLongOrNull() ?: t.toDouble()
        }

        fun str(): String {
            i++
            val b = StringBuilder()
            while (true) {
                if (i >= s.length) fail("unterminated string")
                val c = s[i++]
                when (c) {
                    '"' -> return b.toString()
                    '\\' -> {
                        val e = s[i++]
                        when (e) {
                            '"' -> b.append('"')
                            '\\' -> b.append('\\')
                            '/' -> b.append('/')
                            'b' -> b.append('\b')
                            'f' -> b.append('\u000c')
                            'n' -> b.append('\n')
                            'r' -> b.append('\r')
                            't' -> b.append('\t')
                            'u' -> {
                                b.append(s.substring(i, i + 4).toInt(16).toChar())
                                i += 4
                            }
                            else -> fail("bad escape")
                        }
                    }
                    else -> b.append(c)
                }
            }
        }

        fun obj(): Map<String, Any?> {
            i++
            val m = LinkedHashMap<String, Any?>()
            skip()
            if (s[i] == '}') {
                i++
                return m
            }
            while (true) {
                skip()
                val k = str()
                skip()
                if (s[i++] != ':') fail("expected :")
                skip()
                m[k] = value()
                skip()
                when (s[i++]) {
                    ',' -> {}
                    '}' -> return m
                    else -> fail("expected , or }")
                }
            }
        }

        fun arr(): List<Any?> {
            i++
            val a = ArrayList<Any?>()
            skip()
            if (s[i] == ']') {
                i++
                return a
            }
            while (true) {
                skip()
                a.add(value())
                skip()
                when (s[i++]) {
                    ',' -> {}
                    ']' -> return a
                    else -> fail("expected , or ]")
                }
            }
        }
    }
}

internal fun jsonField(v: Any?, key: String): Any? =
    (v as? Map<*, *> ?: throw IllegalStateException("softchat: expected a JSON object for $key")).get(key)

internal fun jsonString(v: Any?): String = v as? String ?: throw IllegalStateException("softchat: expected a string, got $v")

internal fun jsonLong(v: Any?): Long = (v as? Long) ?: (v as? Int)?.toLong() ?: throw IllegalStateException("softchat: expected an integer, got $v")

internal fun jsonBool(v: Any?): Boolean = v as? Boolean ?: throw IllegalStateException("softchat: expected a boolean, got $v")

@Suppress("UNCHECKED_CAST")
internal fun jsonList(v: Any?): List<Any?> = v as? List<Any?> ?: throw IllegalStateException("softchat: expected an array, got $v")
