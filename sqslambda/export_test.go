package sqslambda

// ToMessage lets the external tests check the record conversion.
var ToMessage = toMessage
