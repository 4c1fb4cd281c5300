"""prepflow storage: the content-addressed stage cache, artifact files (writer, reader, verify), media
codecs, the torch loader and filesystem helpers. It imports nothing from the stages (``tasks``); the
public names are in ``prepflow`` (``from prepflow import Artifact, Preprocessor``)."""
