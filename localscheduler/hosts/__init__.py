"""The servers that run a handler, locally, as Cloud Run runs them: a pool of instances per
function (`pool`), each a functions-framework process serving the function folder's entry point
through `function_source`."""
