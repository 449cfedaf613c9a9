// Output of a library built from a newer schema, read by this facade (scripts/facades/test-facades
// compiles this file together with generated/kotlin, as one module, so it reaches the internal
// decoders the native calls use): values the facade was not generated with decode to UNRECOGNIZED
// and Unrecognized instead of throwing (before, an IllegalStateException inside a listener's update).
package org.softchat

private var passed = 0
private val failures = mutableListOf<String>()

private fun check(name: String, ok: Boolean) {
    if (ok) passed++ else failures += name
}

fun main() {
    check("an enum value a newer library adds decodes as UNRECOGNIZED", DeliveryState.decode("expired") == DeliveryState.UNRECOGNIZED)
    check("a known value still decodes as itself", DeliveryState.decode("accepted") == DeliveryState.ACCEPTED)
    check("fromValue never names UNRECOGNIZED", DeliveryState.fromValue("") == null && DeliveryState.fromValue("expired") == null)
    val status = decodePublishIntentStatus(
        SoftchatJson.parse(
            "{\"intentId\":\"i\",\"eventId\":\"" + "a".repeat(64) + "\",\"relayUrl\":\"wss://r\",\"state\":\"expired\"," +
                "\"category\":\"quota\",\"message\":\"m\",\"attempts\":1}"
        )
    )
    check("a record holding newer values decodes", status.state == DeliveryState.UNRECOGNIZED && status.category == DeliveryCategory.UNRECOGNIZED)
    val activity = decodeManagedTransportActivity(SoftchatJson.parse("{\"kind\":\"relayMigrated\",\"relayUrl\":\"wss://r\"}"))
    check(
        "a union kind a newer library adds decodes as Unrecognized, with its text",
        activity is ManagedTransportActivity.Unrecognized && activity.kindValue == "relayMigrated" &&
            activity.kind == ManagedTransportActivity.Kind.UNRECOGNIZED
    )
    check(
        "an Unrecognized value encodes back to its kind",
        encodeManagedTransportActivity(activity) == linkedMapOf<String, Any?>("kind" to "relayMigrated")
    )
    println("kotlin newer-library: $passed passed, ${failures.size} failed")
    for (f in failures) System.err.println("FAIL $f")
    System.exit(if (failures.isEmpty()) 0 else 1)
}
