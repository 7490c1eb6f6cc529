"""Header names of x402 v2 (and v1, which used X- names and a JSON body)."""

PAYMENT_REQUIRED = "payment-required"
PAYMENT_SIGNATURE = "PAYMENT-SIGNATURE"
PAYMENT_RESPONSE = "payment-response"
X_PAYMENT = "X-PAYMENT"
X_PAYMENT_RESPONSE = "x-payment-response"

# Headers a buyer must never let the agent set: they carry or steer a payment.
PAYMENT_HEADERS = frozenset(
    {"payment-signature", "payment-required", "payment-response", "x-payment", "x-payment-response"}
)

MAX_HEADER_BYTES = 64 * 1024
