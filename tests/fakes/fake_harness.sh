#!/bin/sh
# A FAKE of aotipre's C++ harness (aotipre/cpp/harness.cpp) for the worker's run_harness: it
# announces phases like the real one, then behaves as $FAKE_HARNESS says:
#   ok | raise | segv | hang | garbage
echo "@@aotipre-cpp-phase load_library" >&2
echo "@@aotipre-cpp-phase read_inputs" >&2
echo "@@aotipre-cpp-phase construct" >&2
case "$FAKE_HARNESS" in
  ok)
    echo "@@aotipre-cpp-phase run" >&2
    echo "@@aotipre-cpp-phase done" >&2
    echo 'some other output'
    echo '@@aotipre-cpp {"protocol":1,"mode":"run","ok":true,"construct_s":0.01,"run_s":0.02,"outputs":[],"error":null}'
    ;;
  raise)
    echo "@@aotipre-cpp-phase done" >&2
    echo '@@aotipre-cpp {"protocol":1,"mode":"run","ok":false,"error_phase":"construct","error":{"type":"c10::Error","message":"Could not find schema for x::y."}}'
    exit 3
    ;;
  segv)
    echo "Segmentation fault in the loader" >&2
    kill -SEGV $$
    ;;
  hang)
    sleep 30
    ;;
  garbage)
    echo '@@aotipre-cpp {not json'
    exit 0
    ;;
esac
