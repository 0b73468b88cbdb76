__title__ = "spacy-elmo"
__version__ = "0.2.0"
